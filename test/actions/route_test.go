package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
)

// Exposure through a Gateway in the actions test: some WebApps get v2 spec.expose.gateway from another client
// ("net"), so a canary runs behind an HTTPRoute with a Service of its own, and the route's weights carry its traffic.
// No Gateway controller runs here (Exposed stays False, which Ready does not depend on); the route, its weights and
// the canary's Service are the operator's, and other actors edit and delete them in every phase. The HTTPRoute CRD
// comes and goes (actToggleGatewayAPI).

var httpRouteKind = kind{"HTTPRoute", "httproute", schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}, "gateway.networking.k8s.io/v1"}

// gatewayName is the Gateway every exposed WebApp's route names (none exists: no controller judges the routes).
const gatewayName = "public"

var (
	gatewayGVR      = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}
	gatewayClassGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}
	// mirrorFeatures are what a class lists when its gateways mirror, a share of the requests too.
	mirrorFeatures = []any{map[string]any{"name": "HTTPRouteRequestMirror"}, map[string]any{"name": "HTTPRouteRequestPercentageMirror"}}
)

// gatewayOfClass installs the Gateway and GatewayClass CRDs (once; never uninstalled) and creates Gateway
// gatewayName in the sequence's namespace, of a class of its own whose status, as its controller would write it,
// says its gateways mirror: a plan's mirror then reaches the route. actGatewayFeatures takes that away and back.
func (s *seq) gatewayOfClass(t *testing.T) {
	paths := []string{gatewayAPICRDOf(t, "gateways"), gatewayAPICRDOf(t, "gatewayclasses")}
	if _, err := envtest.InstallCRDs(lc.Config, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("installing the Gateway and GatewayClass CRDs: %v", err)
	}
	ctx := context.Background()
	class := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
		"metadata": map[string]any{"name": s.gatewayClass()}, "spec": map[string]any{"controllerName": "example.com/actions-test"}}}
	created, err := dyn.Resource(gatewayClassGVR).Create(ctx, class, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating GatewayClass %s: %v", s.gatewayClass(), err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(gatewayClassGVR).Delete(context.Background(), s.gatewayClass(), metav1.DeleteOptions{})
	})
	_ = unstructured.SetNestedSlice(created.Object, mirrorFeatures, "status", "supportedFeatures")
	if _, err := dyn.Resource(gatewayClassGVR).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing GatewayClass %s's status: %v", s.gatewayClass(), err)
	}
	gw := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": gatewayName}, "spec": map[string]any{"gatewayClassName": s.gatewayClass(),
			"listeners": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}}}}}
	if _, err := dyn.Resource(gatewayGVR).Namespace(s.ns).Create(ctx, gw, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Gateway %s: %v", gatewayName, err)
	}
}

// gatewayClass names the sequence's GatewayClass.
func (s *seq) gatewayClass() string { return "actions-" + s.ns }

// actGatewayFeatures is the Gateway's controller, replaced by one that does not mirror (its class's status lists
// no feature), or back: a canary whose plan mirrors is rolled back before the route gets the mirror, in whatever
// phase it is; one that does not mirror goes on.
func (s *seq) actGatewayFeatures(*app) bool {
	ctx := context.Background()
	class, err := dyn.Resource(gatewayClassGVR).Get(ctx, s.gatewayClass(), metav1.GetOptions{})
	if err != nil {
		s.fail("reading GatewayClass %s: %v", s.gatewayClass(), err)
	}
	features, _, _ := unstructured.NestedSlice(class.Object, "status", "supportedFeatures")
	what := "the Gateway's controller no longer mirrors: its class's status lists no feature"
	next := []any{}
	if len(features) == 0 {
		what, next = "the Gateway's controller mirrors, a share of the requests too (its class's status says so)", mirrorFeatures
	}
	_ = unstructured.SetNestedSlice(class.Object, next, "status", "supportedFeatures")
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"supportedFeatures": next}})
	s.record(what, fmt.Sprintf("kubectl patch gatewayclass %s --subresource=status --type=merge -p '%s'", s.gatewayClass(), patch))
	if _, err := dyn.Resource(gatewayClassGVR).UpdateStatus(ctx, class, metav1.UpdateOptions{}); err != nil {
		s.fail("writing GatewayClass %s's status: %v", s.gatewayClass(), err)
	}
	return true
}

// actExpose exposes a live WebApp through the Gateway or through an Ingress, changes its hosts or paths, or removes
// spec.expose, as another client ("net") through v2, in whatever phase its canary is.
func (s *seq) actExpose(a *app) bool {
	if a.state != alive {
		return false
	}
	var expose map[string]any
	viaIngress := false
	what := "expose WebApp %s through Gateway " + gatewayName
	switch {
	case (a.exposed || a.ingress) && s.chance(0.3) && (a.plan == nil || !routesByRequest(a.plan)):
		// (Not while the canary's plan routes by request: the API refuses it, tested in TestCanaryRouteRefusals.)
		what = "stop exposing WebApp %s"
	case s.chance(0.3) && (a.plan == nil || !needsGateway(a.plan)):
		// Through an Ingress of class traefik (no controller judges it): a blue/green's preview host is a second one.
		viaIngress = true
		what = "expose WebApp %s through an Ingress"
		fallthrough
	default:
		// (Every field, the other kind's and paths null when not drawn: a JSON merge patch sets exactly this.)
		expose = map[string]any{"hosts": []any{pick(s, a.name+".example.com", "www."+a.name+".example.com")},
			"gateway": map[string]any{"name": gatewayName}, "ingress": nil, "paths": nil}
		if viaIngress {
			expose["ingress"], expose["gateway"] = map[string]any{"className": "traefik"}, nil
		}
		if s.chance(0.4) {
			expose["paths"] = []any{pick(s, "/", "/shop", "/api/")}
		}
	}
	what = fmt.Sprintf(what, a.name) + s.phaseNote(a.name)
	// By a JSON merge patch, removed or set whole (the other kind and the paths taken out when not drawn): a v2
	// server-side apply that leaves a field out does not remove it while the v1 user co-owns the WebApp (docs/api.md,
	// "Known gap"), and one of another operation would keep the entries of a set it does not own.
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"expose": expose}})
	s.record(what, fmt.Sprintf(`kubectl -n %s patch webapps.v2.example.com/%s --type=merge --field-manager=net -p '%s'`, s.ns, a.name, patch))
	_, err := dyn.Resource(webAppV2GVR).Namespace(s.ns).Patch(context.Background(), a.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "net"})
	if err != nil {
		s.fail("writing spec.expose of WebApp %s: %v", a.name, err)
	}
	if got := s.getV2(a.name); got == nil || (got.Spec.Expose != nil) != (expose != nil) || expose != nil && (got.Spec.Expose.Ingress != nil) != viaIngress {
		s.fail("the write of spec.expose to WebApp %s was accepted, but the WebApp's expose is now %+v", a.name, got)
	}
	s.recordWrite(a, "")
	a.exposed, a.ingress = expose != nil && !viaIngress, viaIngress
	return true
}

// needsGateway: plan has a step with matches or a mirror, or steps that keep the version before warm (the API
// refuses each without spec.expose.gateway; a blue/green's preview host is a second Ingress behind one).
func needsGateway(plan map[string]any) bool {
	return plan["blueGreen"] == nil && routesByRequest(plan)
}

// editRoute is `kubectl edit httproute/NAME` sending every request to the canary's Service (added when the route
// has none): another client's Update, which takes the backends from our field manager.
func editRoute(name string) (string, func(*unstructured.Unstructured)) {
	return fmt.Sprintf("kubectl -n NS edit httproute/%s   # every request to %s", name, canaryName(name)), func(u *unstructured.Unstructured) {
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
		for i := range rules {
			r := rules[i].(map[string]any)
			refs, _ := r["backendRefs"].([]any)
			found := false
			for j := range refs {
				b := refs[j].(map[string]any)
				if b["name"] == canaryName(name) {
					b["weight"], found = int64(100), true
				} else {
					b["weight"] = int64(0)
				}
			}
			if !found && len(refs) > 0 {
				c := map[string]any{}
				for k, v := range refs[0].(map[string]any) {
					c[k] = v
				}
				c["name"], c["weight"] = canaryName(name), int64(100)
				refs = append(refs, c)
			}
			r["backendRefs"] = refs
		}
		_ = unstructured.SetNestedSlice(u.Object, rules, "spec", "rules")
	}
}

// routeBackends are the backends of every rule of route u, as "service:weight".
func routeBackends(u *unstructured.Unstructured) []string {
	var out []string
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	for _, r := range rules {
		refs, _, _ := unstructured.NestedSlice(r.(map[string]any), "backendRefs")
		for _, b := range refs {
			m := b.(map[string]any)
			w, ok := m["weight"].(int64)
			if !ok {
				w = 1
			}
			out = append(out, fmt.Sprintf("%v:%d", m["name"], w))
		}
	}
	return out
}

// routeMirrors are the Services route u's rules mirror requests to.
func routeMirrors(u *unstructured.Unstructured) []string {
	var out []string
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	for _, r := range rules {
		filters, _, _ := unstructured.NestedSlice(r.(map[string]any), "filters")
		for _, f := range filters {
			if name, ok, _ := unstructured.NestedString(f.(map[string]any), "requestMirror", "backendRef", "name"); ok {
				out = append(out, name)
			}
		}
	}
	return out
}

// routeConverged says why WebApp a, exposed through a Gateway where the cluster serves HTTPRoute, has no route
// yet (nil once it has, or when checkRouteAtRest would not look): the operator asks discovery every 10 s, so a CRD
// installed just before the actors stopped is noticed within that, not at once.
func (s *seq) routeConverged(ctx context.Context, a *app) error {
	if len(s.blocking(a.name)) > 0 {
		return nil
	}
	app := s.getV2(a.name)
	if app == nil || app.Spec.Expose == nil || app.Spec.Expose.Gateway == nil || !httpRouteServed() {
		return nil
	}
	if app.Spec.Rollout.Canary != nil && stableUnknown(readyOf(app)) {
		return nil
	}
	if _, err := dyn.Resource(httpRouteKind.gvr).Namespace(s.ns).Get(ctx, a.name, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("WebApp %s is exposed through Gateway %s and HTTPRoute is served, but its route is not there yet: %w", a.name, gatewayName, err)
	}
	return nil
}

// checkRouteAtRest: invariant 11, at rest. A WebApp's Service (ours) selects its stable pods alone, whatever a
// blue/green without a Gateway switched; one exposed through a Gateway, where the cluster serves HTTPRoute, has its
// route (controlled by it) sending every request to the stable Service, whatever the actors did to the route (its
// weights edited, the route deleted) or to the canary (a canary the Deployment API refuses included: it stays at
// 0%); the canary's Service, and a preview route or Ingress, are gone once its canary is.
func (s *seq) checkRouteAtRest(a *app) {
	if len(s.blocking(a.name)) > 0 {
		return
	}
	app := s.getV2(a.name)
	if app == nil {
		return
	}
	if app.Spec.Rollout.Canary != nil && stableUnknown(readyOf(app)) {
		return
	}
	if svc := s.get(serviceKind, a.name); svc != nil && controlledBy(svc, app.UID) {
		sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
		if want := map[string]string{webappv2.LabelName: webappv2.AppName, webappv2.LabelInstance: a.name}; !maps.Equal(sel, want) {
			s.fail("invariant 11 (the stable version gets the traffic at rest): WebApp %s's Service selects %v, want its stable pods %v:\n%s\nThe WebApp:\n%s",
				a.name, sel, want, toYAML(svc.Object), toYAML(app))
		}
	}
	routed := app.Spec.Expose != nil && app.Spec.Expose.Gateway != nil && httpRouteServed()
	if !routed && app.Spec.Rollout.Canary != nil && app.Spec.Rollout.Canary.BlueGreen != nil {
		// A blue/green switched by the Service: its preview Service goes with its canary, as behind a route.
		s.checkCanaryServiceAtRest(a, app)
	}
	if s.canaryGoneAtRest(a, app) {
		// A preview route or Ingress goes with its canary, whatever became of the exposure or the strategy since.
		s.checkPreviewsAtRest(a, app)
	}
	if !routed {
		return
	}
	route := s.get(httpRouteKind, a.name)
	if route == nil || !controlledBy(route, app.UID) {
		s.fail("invariant 11 (the stable version gets the traffic at rest): WebApp %s is exposed through Gateway %s, but its HTTPRoute is missing or not its own:\n%s\nThe WebApp:\n%s",
			a.name, gatewayName, toYAMLOrNone(route), toYAML(app))
	}
	want := []string{a.name + ":1"}
	if got := routeBackends(route); !slices.Equal(got, want) {
		s.fail("invariant 11 (the stable version gets the traffic at rest): WebApp %s's route sends requests to %s, want %s:\n%s\nThe WebApp:\n%s",
			a.name, strings.Join(got, ", "), strings.Join(want, ", "), toYAML(route.Object), toYAML(app))
	}
	if m := routeMirrors(route); len(m) > 0 {
		s.fail("invariant 11 (the stable version gets the traffic at rest): WebApp %s's route still mirrors requests to %s:\n%s\nThe WebApp:\n%s",
			a.name, strings.Join(m, ", "), toYAML(route.Object), toYAML(app))
	}
	s.checkCanaryServiceAtRest(a, app)
}

// checkPreviewsAtRest: invariant 11 for a blue/green's preview route and Ingress: gone at rest.
func (s *seq) checkPreviewsAtRest(a *app, app *webappv2.WebApp) {
	for _, o := range []objectRef{{httpRouteKind, previewName(a.name), "preview route"}, {ingressKind, previewName(a.name), "preview Ingress"}} {
		if o.k == httpRouteKind && !httpRouteServed() {
			continue
		}
		if preview := s.get(o.k, o.name); preview != nil && controlledBy(preview, app.UID) {
			s.fail("invariant 11 (the canary's objects go with its canary): at rest, WebApp %s's %s %s is still there:\n%s\nThe WebApp:\n%s",
				a.name, o.role, preview.GetName(), toYAML(preview.Object), toYAML(app))
		}
	}
}

// canaryGoneAtRest: WebApp a's canary objects are expected gone at rest (not a version the Deployment API refuses,
// which stays a canary at 0% with its objects, nor a version kept warm).
func (s *seq) canaryGoneAtRest(a *app, app *webappv2.WebApp) bool {
	if refused(a.spec) {
		return false
	}
	if dep := s.get(deploymentKind, canaryName(a.name)); dep != nil {
		if _, ok := keptWarm(app, dep); ok {
			return false
		}
	}
	return true
}

// checkCanaryServiceAtRest: invariant 11 for the canary's Service: gone at rest once its canary is (not for a
// version the Deployment API refuses, which stays a canary at 0% with its Service, nor for a version kept warm).
func (s *seq) checkCanaryServiceAtRest(a *app, app *webappv2.WebApp) {
	if !s.canaryGoneAtRest(a, app) {
		return
	}
	if svc := s.get(serviceKind, canaryName(a.name)); svc != nil && controlledBy(svc, app.UID) {
		s.fail("invariant 11 (the canary's objects go with its canary): at rest, WebApp %s's canary Service %s is still there:\n%s\nThe WebApp:\n%s",
			a.name, svc.GetName(), toYAML(svc.Object), toYAML(app))
	}
}

// releasedRouteLeftover: invariant 7 for the route and the Service. A route released by an Orphan deletion (no
// controller, it was the WebApp's) sends nothing to the canary's Service, and a released Service selects no canary
// pod, the canary having gone with the WebApp: traffic was put back on the stable version first.
func (s *seq) releasedRouteLeftover(name string) error {
	if svc := s.get(serviceKind, name); svc != nil && !s.ours[svc.GetUID()] && metav1.GetControllerOfNoCopy(svc) == nil {
		// A blue/green's switch without a Gateway: a released Service selects the stable pods, never the canary's.
		if sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector"); sel[webappv2.LabelCanaryOf] != "" {
			return fmt.Errorf("the released Service %s still selects the canary's pods (%v):\n%s", name, sel, toYAML(svc.Object))
		}
	}
	u := s.get(httpRouteKind, name)
	if u == nil || s.ours[u.GetUID()] || metav1.GetControllerOfNoCopy(u) != nil {
		return nil
	}
	if m := routeMirrors(u); slices.Contains(m, canaryName(name)) {
		return fmt.Errorf("the released HTTPRoute %s still mirrors requests to the canary's Service:\n%s", name, toYAML(u.Object))
	}
	for _, b := range routeBackends(u) {
		svc, w, _ := strings.Cut(b, ":")
		if svc == canaryName(name) && w != "0" {
			return fmt.Errorf("the released HTTPRoute %s still sends requests to the canary's Service (%s):\n%s", name, strings.Join(routeBackends(u), ", "), toYAML(u.Object))
		}
	}
	return nil
}

func toYAMLOrNone(u *unstructured.Unstructured) string {
	if u == nil {
		return "(none)"
	}
	return toYAML(u.Object)
}

// checkCanaryNeverUnderTheSwitch: invariant 12, at every state the watches recorded. A canary Deployment the operator
// deletes (not an actor; its WebApp neither gone nor being deleted, when the garbage collector deletes in any order)
// is never one that the WebApp's Service, as our manager applied it, still selected (a blue/green's switch without a
// Gateway), and it goes retireSeconds after the Service's selector left it, less the watches' delivery: the proxies
// follow the selector first, however late the write that moved it (a fault, a refusal) succeeded.
func (s *seq) checkCanaryNeverUnderTheSwitch() {
	for _, d := range s.hist.all(deploymentKind.name) {
		name, isCanary := strings.CutSuffix(d.obj.GetName(), "-canary")
		if !d.deleted || d.rv <= s.switchChecked || !isCanary || s.deletedByActor[d.obj.GetUID()] {
			continue
		}
		owner := metav1.GetControllerOf(d.obj)
		if owner == nil || s.deletedByActor[owner.UID] || s.webAppDeletingAt(owner.UID, d.rv) {
			continue
		}
		afterSwitch, violation := underTheSwitch(d, s.hist.versions(serviceKind.name, name), owner.UID, s.retireOf(name))
		if afterSwitch {
			s.stats.afterSwitch++
		}
		if violation != "" {
			s.fail("invariant 12 (a canary's pods never go under the switch's traffic, and go retireSeconds after it left them): %s", violation)
		}
		s.switchChecked = max(s.switchChecked, d.rv)
	}
}

// underTheSwitch judges the deletion d of a canary Deployment of WebApp owner by the versions of its Service up to it
// (retire: how long its pods stay at least after the traffic left them): whether the Service had switched to the
// canary's pods before, and what is wrong ("": nothing).
func underTheSwitch(d version, services []version, owner types.UID, retire time.Duration) (bool, string) {
	var selected bool
	var left version
	for _, v := range services {
		if v.rv > d.rv || !controlledBy(v.obj, owner) {
			continue
		}
		switch switched := !v.deleted && ownsCanarySelector(v.obj); {
		case switched:
			selected, left = true, version{}
		case selected && left.obj == nil:
			left = v
		}
	}
	switch {
	case selected && left.obj == nil:
		return true, fmt.Sprintf("Deployment %s was deleted (resourceVersion %d) while Service %s, as the operator applied it, selected its pods",
			d.obj.GetName(), d.rv, strings.TrimSuffix(d.obj.GetName(), "-canary"))
	case selected && d.at.Sub(left.at) < retire-switchSlack:
		return true, fmt.Sprintf("Deployment %s was deleted %v after Service %s's selector left its pods (resourceVersion %d), want %v at least:\n%s",
			d.obj.GetName(), d.at.Sub(left.at).Round(time.Millisecond), left.obj.GetName(), left.rv, retire, toYAML(left.obj.Object))
	}
	return selected, ""
}

// retireOf is how long the canary pods of the WebApp named name stay at least after the traffic left them.
func (s *seq) retireOf(name string) time.Duration {
	for _, a := range s.apps {
		if a.name == name {
			return a.retireAtLeast()
		}
	}
	return canary.Retire
}

// switchSlack is what the watches' delivery may take off the time between two changes they recorded.
const switchSlack = 2 * time.Second

// ownsCanarySelector: our field manager's apply owns the canary's key in the Service's selector (the switch).
func ownsCanarySelector(u *unstructured.Unstructured) bool {
	for _, e := range u.GetManagedFields() {
		if e.Manager == webappv2.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.FieldsV1 != nil &&
			strings.Contains(e.FieldsV1.GetRawString(), `"f:`+webappv2.LabelCanaryOf+`"`) {
			sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector")
			return sel[webappv2.LabelCanaryOf] != ""
		}
	}
	return false
}

// webAppDeletingAt: the WebApp of uid was gone, or being deleted, at resourceVersion rv.
func (s *seq) webAppDeletingAt(uid types.UID, rv int64) bool {
	for _, v := range s.hist.all(webAppKind.name) {
		if v.obj.GetUID() == uid && v.rv < rv && (v.deleted || v.obj.GetDeletionTimestamp() != nil) {
			return true
		}
	}
	return false
}
