package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/test/testutil"
)

// routeRules say the rules of the WebApp name's route, "|" between them: each rule's matches (path, and headers as
// name=value or name~regexp), its mirror filters and its backends as name=weight.
func routeRules(ctx context.Context, ns, name string) (string, error) {
	route := &gwv1.HTTPRoute{}
	if err := get(ctx, ns, name, route); err != nil {
		return "", err
	}
	var rules []string
	for _, r := range route.Spec.Rules {
		var ms, fs, bs []string
		for _, m := range r.Matches {
			w := ptr.Deref(m.Path.Value, "")
			for _, h := range m.Headers {
				sep := "="
				if ptr.Deref(h.Type, "") == gwv1.HeaderMatchRegularExpression {
					sep = "~"
				}
				w += " " + string(h.Name) + sep + h.Value
			}
			ms = append(ms, w)
		}
		for _, f := range r.Filters {
			if m := f.RequestMirror; m != nil {
				fs = append(fs, fmt.Sprintf("mirror %s %d%%", m.BackendRef.Name, ptr.Deref(m.Percent, 100)))
			} else {
				fs = append(fs, string(f.Type))
			}
		}
		for _, b := range r.BackendRefs {
			bs = append(bs, fmt.Sprintf("%s=%d", b.Name, ptr.Deref(b.Weight, 1)))
		}
		rule := "[" + strings.Join(ms, ", ") + "] "
		if len(fs) > 0 {
			rule += strings.Join(fs, ", ") + " "
		}
		rules = append(rules, rule+strings.Join(bs, ","))
	}
	return strings.Join(rules, " | "), nil
}

// waitRoute waits until the WebApp web's route's rules read want (routeRules).
func waitRoute(t *testing.T, ns, want string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, "the route "+want, func(ctx context.Context) error {
		got, err := routeRules(ctx, ns, "web")
		if err == nil && got != want {
			err = fmt.Errorf("the route is %s", got)
		}
		return err
	})
}

// TestCanaryTrafficByRequest walks a canary whose steps route by request through a Gateway on the real API server
// (the Gateway API's own CRD validates every route), the Deployment controller's part played by the test: a step
// of matches alone (weight 0) adds the operator's rule for them beside expose's, once the canary is ready; the next
// step's weight and mirror replace it; an abort leaves expose's rule as it was, no rule or filter of the canary's
// left, another manager's annotation kept. At each gate the operator is at rest: a fresh one sends nothing.
func TestCanaryTrafficByRequest(t *testing.T) {
	installGatewayAPI(t)
	ns := newNamespace(t)
	op := startOperator(t, ns, time.Second)
	ctx := context.Background()
	matches := []webappv2.CanaryMatch{
		{Headers: []webappv2.CanaryHeaderMatch{{Name: "X-Canary", Value: "always"}, {Name: "User-Agent", Value: ".*Firefox.*", Type: webappv2.HeaderRegularExpression}}},
		{Cookie: &webappv2.CanaryCookieMatch{Name: "canary", Value: "yes"}},
	}
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv2.WebAppSpec{
		Image: "shop:1", Replicas: ptr.To[int32](4), Ports: []webappv2.Port{{Name: "http", Port: 8080}},
		Expose: &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Paths: []webappv2.PathPrefix{"/api", "/web"}, Gateway: &webappv2.GatewayRef{Name: "public"}},
		Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{
			{Matches: matches, Gate: &webappv2.CanaryGate{}},
			{Weight: 10, MirrorPercent: 50, Gate: &webappv2.CanaryGate{}},
		}}},
	}}
	// The Gateway's class says it mirrors, a share too, as its controller would (none runs here).
	gatewayOfClass(t, ns, "public", "mirrors-"+ns, canary.FeatureMirror, canary.FeaturePercentageMirror)
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, ns, "web")
	markAvailable(t, ns, "web")
	canaryPhase(t, ns, "web", "Stable/0/0")
	stableOnly := "[/api, /web] web=1"
	waitRoute(t, ns, stableOnly)
	applyTheirs(t, "gateway.networking.k8s.io/v1", "HTTPRoute", ns, "web", "annotations", "team.example/owner", "shop")

	// Step 1, matches alone: one canary pod; no rule for it until it is ready and warmed up.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "shop:2" })
	canaryDep := &appsv1.Deployment{}
	testutil.Eventually(t, wait10s, "the canary Deployment", func(ctx context.Context) error { return get(ctx, ns, "web-canary", canaryDep) })
	if n := ptr.Deref(canaryDep.Spec.Replicas, 0); n != 1 {
		t.Errorf("a step of matches alone runs %d canary pods, want 1", n)
	}
	if got, err := routeRules(ctx, ns, "web"); err != nil || got != stableOnly {
		t.Errorf("the route before the canary is ready: %s %v, want %s", got, err, stableOnly)
	}
	markAvailable(t, ns, "web-canary")
	held := status(t, ns, "held at step 1's gate", func(c *webappv2.CanaryStatus) bool { return c.Step == 0 && c.GateSince != nil })
	ab := " X-Canary=always User-Agent~.*Firefox.*"
	cookie := ` Cookie~^(.*;\s*)?canary=yes(\s*;.*)?$`
	waitRoute(t, ns, stableOnly+" | [/api"+ab+", /web"+ab+", /api"+cookie+", /web"+cookie+"] web-canary=1")
	if ready := meta.FindStatusCondition(held.Status.Conditions, webappv2.ConditionReady); ready == nil ||
		!strings.Contains(ready.Message, "step 1 of 2: the requests with header X-Canary: always and header User-Agent matching .*Firefox.* or with cookie canary=yes (revision") {
		t.Errorf("Ready does not say which requests the canary serves: %+v", ready)
	}
	code, out, errOut := kubectlWebApp(t, "-n", ns, "explain", "web")
	if code != 0 || !strings.Contains(out, ".spec.rules[1].matches: X-Canary: always and User-Agent matching .*Firefox.* or Cookie matching") {
		t.Errorf("explain does not show the canary's rule: exit %d, %s%s", code, out, errOut)
	}
	op = restartCostsNoWrites(t, op, ns)

	// Step 2, promoted by a person: pods for its weight and mirror (60% of 4: 3), the weight and the mirror once
	// they are ready, and the matches' rule gone.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Annotations = map[string]string{webappv2.AnnotationAction: canary.PromoteStep(held.Status.Canary.CanaryRevision, 0)}
	})
	testutil.Eventually(t, wait10s, "three canary pods", func(ctx context.Context) error {
		if err := get(ctx, ns, "web-canary", canaryDep); err != nil {
			return err
		}
		if n := ptr.Deref(canaryDep.Spec.Replicas, 0); n != 3 {
			return fmt.Errorf("%d canary pods", n)
		}
		return nil
	})
	markAvailable(t, ns, "web-canary")
	status(t, ns, "held at step 2's gate", func(c *webappv2.CanaryStatus) bool { return c.Step == 1 && c.GateSince != nil && c.Weight == 10 })
	waitRoute(t, ns, "[/api, /web] mirror web-canary 50% web=90,web-canary=10")
	op = restartCostsNoWrites(t, op, ns)

	// Aborted: expose's rule alone, as it was, and another manager's annotation still there.
	update(t, ns, "web", &webappv2.WebApp{}, func(a *webappv2.WebApp) {
		a.Annotations[webappv2.AnnotationAction] = canary.Abort(held.Status.Canary.CanaryRevision)
	})
	canaryPhase(t, ns, "web", "RolledBack/1/0")
	waitRoute(t, ns, stableOnly)
	route := &gwv1.HTTPRoute{}
	if err := get(ctx, ns, "web", route); err != nil || route.Annotations["team.example/owner"] != "shop" {
		t.Errorf("another manager's annotation on the route is gone: %v %v", route.Annotations, err)
	}
	restartCostsNoWrites(t, op, ns)
}

// TestAMirrorTheGatewayCannotDoRollsBack: a plan whose step mirrors, behind a Gateway whose class does not list the
// feature as supported (Traefik 3.6 answers 500 to every request of a rule with a mirror), is rolled back before
// the route gets the mirror, saying what the class lacks; the route never had a filter.
func TestAMirrorTheGatewayCannotDoRollsBack(t *testing.T) {
	installGatewayAPI(t)
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	// It mirrors, but not a share.
	gatewayOfClass(t, ns, "public", "whole-mirrors-"+ns, canary.FeatureMirror)
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: webappv2.WebAppSpec{
		Image: "shop:1", Replicas: ptr.To[int32](2), Ports: []webappv2.Port{{Name: "http", Port: 8080}},
		Expose:  &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public"}},
		Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 10}, {Weight: 20, MirrorPercent: 50}}}},
	}}
	if err := k8s.Create(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	startCanary(t, ns, "web")
	back := canaryPhase(t, ns, "web", "RolledBack/0/0")
	if c := back.Status.Canary; c.Reason != webappv2.ReasonGatewayUnsupported ||
		!strings.Contains(c.Message, "GatewayClass whole-mirrors-"+ns+" of Gateway "+ns+"/public does not list HTTPRouteRequestPercentageMirror in status.supportedFeatures") {
		t.Errorf("rolled back with %s: %s, want GatewayUnsupported naming HTTPRouteRequestPercentageMirror", c.Reason, c.Message)
	}
	waitRoute(t, ns, "[/] web=1")
}

// gatewayOfClass creates Gateway ns/name of a new GatewayClass class whose status lists features as supported,
// written as its controller would.
func gatewayOfClass(t *testing.T, ns, name, class string, features ...string) {
	t.Helper()
	ctx := context.Background()
	gc := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Spec: gwv1.GatewayClassSpec{ControllerName: "example.com/test-gateway"}}
	if err := k8s.Create(ctx, gc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), gc) })
	for _, f := range features {
		gc.Status.SupportedFeatures = append(gc.Status.SupportedFeatures, gwv1.SupportedFeature{Name: gwv1.FeatureName(f)})
	}
	if err := k8s.Status().Update(ctx, gc); err != nil {
		t.Fatal(err)
	}
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(class),
		Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}}}
	if err := k8s.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
}

// status waits until the WebApp web's status.canary is as ok says, and returns the WebApp.
func status(t *testing.T, ns, what string, ok func(*webappv2.CanaryStatus) bool) *webappv2.WebApp {
	t.Helper()
	app := &webappv2.WebApp{}
	testutil.Eventually(t, 30*time.Second, what, func(ctx context.Context) error {
		if err := get(ctx, ns, "web", app); err != nil {
			return err
		}
		if app.Status.Canary == nil || !ok(app.Status.Canary) {
			return fmt.Errorf("status.canary %+v", app.Status.Canary)
		}
		return nil
	})
	return app
}

// TestCanaryRouteRefusals: the API server refuses what the route could not say, with a message naming it.
func TestCanaryRouteRefusals(t *testing.T) {
	ns := newNamespace(t)
	gateway := &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public"}}
	ingress := &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Ingress: &webappv2.IngressRef{ClassName: "nginx"}}
	header := func(name, value string, typ webappv2.HeaderMatchType) []webappv2.CanaryMatch {
		return []webappv2.CanaryMatch{{Headers: []webappv2.CanaryHeaderMatch{{Name: name, Value: value, Type: typ}}}}
	}
	for _, c := range []struct {
		name   string
		expose *webappv2.Expose
		step   webappv2.CanaryStep
		want   string // "" accepted
	}{
		{"a header match", gateway, webappv2.CanaryStep{Weight: 10, Matches: header("X-Canary", "always", "")}, ""},
		{"weight 0 with a match", gateway, webappv2.CanaryStep{Matches: header("X-Canary", "always", "")}, ""},
		{"weight 0 with a mirror", gateway, webappv2.CanaryStep{MirrorPercent: 50}, ""},
		{"a regular expression", gateway, webappv2.CanaryStep{Weight: 10, Matches: header("User-Agent", ".*Firefox.*", webappv2.HeaderRegularExpression)}, ""},
		{"a cookie", gateway, webappv2.CanaryStep{Weight: 10, Matches: []webappv2.CanaryMatch{{Cookie: &webappv2.CanaryCookieMatch{Name: "canary", Value: "always"}}}}, ""},
		{"weight 0 alone", gateway, webappv2.CanaryStep{}, "a step with weight 0 sends the canary only"},
		{"a match behind an Ingress", ingress, webappv2.CanaryStep{Weight: 10, Matches: header("X-Canary", "always", "")}, "need expose.gateway"},
		{"a mirror without expose", nil, webappv2.CanaryStep{Weight: 10, MirrorPercent: 10}, "need expose.gateway"},
		{"a match of nothing", gateway, webappv2.CanaryStep{Weight: 10, Matches: []webappv2.CanaryMatch{{}}}, "a match needs headers or a cookie"},
		{"a cookie and a Cookie header", gateway, webappv2.CanaryStep{Weight: 10, Matches: []webappv2.CanaryMatch{{
			Cookie: &webappv2.CanaryCookieMatch{Name: "canary", Value: "always"}, Headers: []webappv2.CanaryHeaderMatch{{Name: "COOKIE", Value: "x"}}}}}, "cannot match a header named Cookie too"},
		{"a header twice", gateway, webappv2.CanaryStep{Weight: 10, Matches: []webappv2.CanaryMatch{{
			Headers: []webappv2.CanaryHeaderMatch{{Name: "x-canary", Value: "a"}, {Name: "X-Canary", Value: "b"}}}}}, "a match names a header once"},
		{"a broken regular expression", gateway, webappv2.CanaryStep{Weight: 10, Matches: header("X-Canary", "(a", webappv2.HeaderRegularExpression)}, "regular expression"},
		{"a header name with a space", gateway, webappv2.CanaryStep{Weight: 10, Matches: header("X Canary", "a", "")}, "headers[0].name"},
		{"a cookie value with a semicolon", gateway, webappv2.CanaryStep{Weight: 10, Matches: []webappv2.CanaryMatch{{Cookie: &webappv2.CanaryCookieMatch{Name: "c", Value: "a;b"}}}}, "cookie.value"},
		{"a mirror of 0%", gateway, webappv2.CanaryStep{Weight: 10, MirrorPercent: -1}, "mirrorPercent"},
	} {
		judgeCreate(t, c.name, &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "route-"}, Spec: webappv2.WebAppSpec{Image: "shop:1",
			Expose: c.expose, Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{c.step}}}}}, c.want)
	}
}

// judgeCreate creates app and fails the test unless the API server accepts it (want "") or refuses it with a
// message saying want.
func judgeCreate(t *testing.T, what string, app *webappv2.WebApp, want string) {
	t.Helper()
	err := k8s.Create(context.Background(), app)
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: %v, want accepted", what, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: %v, want refused, saying %q", what, err, want)
	}
}
