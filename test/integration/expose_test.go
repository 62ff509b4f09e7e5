package integration

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/test/cluster"
	"github.com/example/webapp-operator/test/testutil"
)

// gatewayAPICRDs are the Gateway API's standard HTTPRoute, Gateway and GatewayClass CRDs, from the module go.mod
// pins.
func gatewayAPICRDs(t *testing.T) []string {
	t.Helper()
	module, err := cluster.ModuleDir(cluster.RepoRoot(), "sigs.k8s.io/gateway-api")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range []string{"httproutes", "gateways", "gatewayclasses"} {
		paths = append(paths, filepath.Join(module, "config", "crd", "standard", "gateway.networking.k8s.io_"+r+".yaml"))
	}
	return paths
}

// installGatewayAPI installs the Gateway API's CRDs unless HTTPRoute is served, and waits until it is.
func installGatewayAPI(t *testing.T) {
	t.Helper()
	if httpRouteServed() {
		return
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: gatewayAPICRDs(t), ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "HTTPRoute served", func(context.Context) error {
		if !httpRouteServed() {
			return errors.New("not in discovery")
		}
		return nil
	})
}

// uninstallGatewayAPI removes the Gateway API's CRDs (an earlier test may have installed it) and waits until it is gone.
func uninstallGatewayAPI(t *testing.T) {
	t.Helper()
	if !httpRouteServed() {
		return
	}
	if err := envtest.UninstallCRDs(cfg, envtest.CRDInstallOptions{Paths: gatewayAPICRDs(t)}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, "HTTPRoute no longer served", func(context.Context) error {
		if httpRouteServed() {
			return errors.New("still in discovery")
		}
		return nil
	})
}

func httpRouteServed() bool {
	d := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	list, err := d.ServerResourcesForGroupVersion("gateway.networking.k8s.io/v1")
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == "httproutes" {
			return true
		}
	}
	return false
}

// exposedCond is a WebApp's Exposed condition as "Status/Reason" (or "none").
func exposedCond(ctx context.Context, ns, name string) (string, *webappv2.WebApp, error) {
	app := &webappv2.WebApp{}
	if err := get(ctx, ns, name, app); err != nil {
		return "", nil, err
	}
	c := meta.FindStatusCondition(app.Status.Conditions, webappv2.ConditionExposed)
	if c == nil {
		return "none", app, nil
	}
	return string(c.Status) + "/" + c.Reason, app, nil
}

// TestExposeThroughIngressAndAGatewayAPIInstalledLater: with no Gateway API in the cluster the operator starts,
// exposes a WebApp through an Ingress (Exposed once the controller publishes an address), and tells a WebApp that
// asks for a Gateway that HTTPRoute is not served; once the HTTPRoute CRD is installed, with no restart, it applies
// the route, and Exposed follows the Gateway's verdict in the route's status. At rest neither costs a write;
// removing expose removes the route.
func TestExposeThroughIngressAndAGatewayAPIInstalledLater(t *testing.T) {
	uninstallGatewayAPI(t)
	ns := newNamespace(t)
	ctx := context.Background()
	op := startOperator(t, ns, time.Second)
	hosts := []webappv2.Hostname{"shop.example.com"}
	for name, e := range map[string]*webappv2.Expose{
		"via-ingress": {Hosts: hosts, Paths: []webappv2.PathPrefix{"/api"}, Ingress: &webappv2.IngressRef{ClassName: "traefik"}, TLS: &webappv2.ExposeTLS{SecretName: "shop-tls"}},
		"via-gateway": {Hosts: hosts, Gateway: &webappv2.GatewayRef{Name: "public", Namespace: "infra"}},
	} {
		app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: webappv2.WebAppSpec{Image: "nginx", Expose: e}}
		if err := k8s.Create(ctx, app); err != nil {
			t.Fatal(err)
		}
	}

	// The Ingress: its rules, the URL, and Exposed waiting for the controller's address.
	testutil.Eventually(t, 30*time.Second, "the Ingress and its WebApp's status", func(ctx context.Context) error {
		ing := &networkingv1.Ingress{}
		if err := get(ctx, ns, "via-ingress", ing); err != nil {
			return err
		}
		if r := ing.Spec.Rules; len(r) != 1 || r[0].Host != "shop.example.com" || r[0].HTTP.Paths[0].Path != "/api" || ing.Spec.TLS[0].SecretName != "shop-tls" {
			return fmt.Errorf("ingress spec %+v", ing.Spec)
		}
		cond, app, err := exposedCond(ctx, ns, "via-ingress")
		if err == nil && (cond != "False/WaitingForAddress" || app.Status.URL != "https://shop.example.com/api") {
			err = fmt.Errorf("exposed %s, url %q", cond, app.Status.URL)
		}
		return err
	})
	// The Ingress controller publishes its address.
	ing := &networkingv1.Ingress{}
	if err := get(ctx, ns, "via-ingress", ing); err != nil {
		t.Fatal(err)
	}
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "10.0.0.9"}}
	if err := k8s.Status().Update(ctx, ing); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "Exposed with the Ingress's address", func(ctx context.Context) error {
		cond, _, err := exposedCond(ctx, ns, "via-ingress")
		if err == nil && cond != "True/Exposed" {
			err = fmt.Errorf("exposed %s", cond)
		}
		return err
	})
	// No Gateway API: said so; nothing else is affected (the Ingress WebApp above converged meanwhile).
	testutil.Eventually(t, 30*time.Second, "GatewayAPINotInstalled", func(ctx context.Context) error {
		cond, _, err := exposedCond(ctx, ns, "via-gateway")
		if err == nil && cond != "False/GatewayAPINotInstalled" {
			err = fmt.Errorf("exposed %s", cond)
		}
		return err
	})

	// The Gateway API is installed: the route appears without a restart.
	installed := time.Now()
	installGatewayAPI(t)
	route := &gwv1.HTTPRoute{}
	testutil.Eventually(t, 60*time.Second, "the HTTPRoute", func(ctx context.Context) error {
		if err := get(ctx, ns, "via-gateway", route); err != nil {
			return err
		}
		if p := route.Spec.ParentRefs; len(p) != 1 || p[0].Name != "public" || string(*p[0].Namespace) != "infra" || route.Spec.Hostnames[0] != "shop.example.com" {
			return fmt.Errorf("route spec %+v", route.Spec)
		}
		cond, _, err := exposedCond(ctx, ns, "via-gateway")
		if err == nil && cond != "False/WaitingForGateway" {
			err = fmt.Errorf("exposed %s", cond)
		}
		return err
	})
	t.Logf("HTTPRoute applied %.1fs after the CRD's install began", time.Since(installed).Seconds())
	// The Gateway's controller accepts it.
	infra := gwv1.Namespace("infra")
	route.Status.Parents = []gwv1.RouteParentStatus{{ParentRef: gwv1.ParentReference{Name: "public", Namespace: &infra},
		ControllerName: "example.net/gateway", Conditions: []metav1.Condition{
			{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: route.Generation, LastTransitionTime: metav1.Now()},
			{Type: "ResolvedRefs", Status: metav1.ConditionTrue, Reason: "ResolvedRefs", ObservedGeneration: route.Generation, LastTransitionTime: metav1.Now()},
		}}}
	if err := k8s.Status().Update(ctx, route); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "Exposed by the Gateway", func(ctx context.Context) error {
		cond, app, err := exposedCond(ctx, ns, "via-gateway")
		if err == nil && (cond != "True/Exposed" || app.Status.URL != "http://shop.example.com/") {
			err = fmt.Errorf("exposed %s, url %q", cond, app.Status.URL)
		}
		return err
	})

	// Drift on either child (an edit of a field we own) is repaired.
	ing = &networkingv1.Ingress{}
	if err := get(ctx, ns, "via-ingress", ing); err != nil {
		t.Fatal(err)
	}
	ing.Spec.Rules[0].Host = "elsewhere.example.com"
	if err := k8s.Update(ctx, ing); err != nil {
		t.Fatal(err)
	}
	if err := get(ctx, ns, "via-gateway", route); err != nil {
		t.Fatal(err)
	}
	route.Spec.Hostnames = []gwv1.Hostname{"elsewhere.example.com"}
	if err := k8s.Update(ctx, route); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "both children repaired", func(ctx context.Context) error {
		if err := get(ctx, ns, "via-ingress", ing); err != nil {
			return err
		}
		if err := get(ctx, ns, "via-gateway", route); err != nil {
			return err
		}
		if ing.Spec.Rules[0].Host != "shop.example.com" || len(route.Spec.Hostnames) != 1 || route.Spec.Hostnames[0] != "shop.example.com" {
			return fmt.Errorf("ingress host %s, route hostnames %v", ing.Spec.Rules[0].Host, route.Spec.Hostnames)
		}
		return nil
	})

	// At rest: no write, and none after a restart.
	waitResyncs(t, 3, 30*time.Second)
	op.writes.take()
	waitResyncs(t, 3, 30*time.Second)
	if w := op.writes.take(); len(w) != 0 {
		t.Errorf("%d writes at rest: %q", len(w), w)
	}
	restartCostsNoWrites(t, op, ns)

	// expose removed: the route goes, and so does the condition; the URL is the Service's again.
	app := &webappv2.WebApp{}
	if err := get(ctx, ns, "via-gateway", app); err != nil {
		t.Fatal(err)
	}
	app.Spec.Expose = nil
	if err := k8s.Update(ctx, app); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the route gone, and the condition", func(ctx context.Context) error {
		if err := get(ctx, ns, "via-gateway", &gwv1.HTTPRoute{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("route still there (%w)", err)
		}
		cond, app, err := exposedCond(ctx, ns, "via-gateway")
		if err == nil && (cond != "none" || app.Status.URL != "http://via-gateway."+ns+".svc:80" || len(app.Status.URLs) != 0) {
			err = fmt.Errorf("exposed %s, url %q %v", cond, app.Status.URL, app.Status.URLs)
		}
		return err
	})
}

// TestAGatewayAPIRemovedIsAStateNotAnErrorStorm: the HTTPRoute CRD is deleted while a WebApp exposes through a
// Gateway. Within the discovery period the WebApp says GatewayAPINotInstalled (never a ReconcileError), with one
// status write and no event, and nothing more is sent while the API is missing; reinstalled, the route is applied
// again within the discovery period, not after a backoff. At rest and after a restart: zero writes.
func TestAGatewayAPIRemovedIsAStateNotAnErrorStorm(t *testing.T) {
	// The discovery period (servedAPIsRecheck) and a margin for a busy machine.
	const within = 10*time.Second + 5*time.Second
	installGatewayAPI(t)
	t.Cleanup(func() { installGatewayAPI(t) })
	ns := newNamespace(t)
	ctx := context.Background()
	op := startOperator(t, ns, time.Second)
	for name, e := range map[string]*webappv2.Expose{
		"routed": {Hosts: []webappv2.Hostname{"shop.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public", Namespace: "infra"}},
		"plain":  nil,
	} {
		app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: webappv2.WebAppSpec{Image: "nginx", Expose: e}}
		if err := k8s.Create(ctx, app); err != nil {
			t.Fatal(err)
		}
	}
	routeApplied := func(ctx context.Context) error {
		if err := get(ctx, ns, "routed", &gwv1.HTTPRoute{}); err != nil {
			return err
		}
		cond, _, err := exposedCond(ctx, ns, "routed")
		if err == nil && cond != "False/WaitingForGateway" {
			err = fmt.Errorf("exposed %s", cond)
		}
		return err
	}
	testutil.Eventually(t, 30*time.Second, "the HTTPRoute", routeApplied)
	waitResyncs(t, 2, 30*time.Second)
	op.writes.take()

	// The Gateway API is uninstalled.
	removed := time.Now()
	uninstallGatewayAPI(t)
	var errorSeen *metav1.Condition
	testutil.Eventually(t, within, "GatewayAPINotInstalled", func(ctx context.Context) error {
		cond, app, err := exposedCond(ctx, ns, "routed")
		if err != nil {
			return err
		}
		if ready := meta.FindStatusCondition(app.Status.Conditions, webappv2.ConditionReady); errorSeen == nil && (ready == nil || ready.Reason == "ReconcileError") {
			errorSeen = ready
		}
		if cond != "False/GatewayAPINotInstalled" {
			return fmt.Errorf("exposed %s", cond)
		}
		return nil
	})
	if errorSeen != nil {
		t.Errorf("Ready while the API went: %+v", errorSeen)
	}
	t.Logf("GatewayAPINotInstalled %.1fs after the CRD's deletion began", time.Since(removed).Seconds())
	// While it is missing: the one status change, no event, no apply, no retry.
	waitResyncs(t, 3, 30*time.Second)
	// (One apply of the route may find the CRD terminating: the route's deletion with the CRD brings the WebApp
	// back before discovery stops listing the kind.)
	statusPath := "/apis/example.com/v2/namespaces/" + ns + "/webapps/routed/status"
	routePath := "/apis/gateway.networking.k8s.io/v1/namespaces/" + ns + "/httproutes/routed"
	var others []string
	statusWrites, routeApplies := 0, 0
	for _, w := range op.writes.take() {
		switch w {
		case "PATCH " + statusPath:
			statusWrites++
		case "PATCH " + routePath:
			routeApplies++
		default:
			others = append(others, w)
		}
	}
	if statusWrites > 1 || routeApplies > 1 || len(others) > 0 {
		t.Errorf("while the Gateway API goes and is missing: %d status writes of the routed WebApp (want at most 1), %d applies of its route (at most 1), and other requests: %q",
			statusWrites, routeApplies, others)
	}
	if ev := eventsSince(t, ns, removed); len(ev) > 0 {
		t.Errorf("events while the Gateway API goes and is missing: %q", ev)
	}

	// Reinstalled: the route is back within the discovery period.
	installed := time.Now()
	installGatewayAPI(t)
	testutil.Eventually(t, within, "the HTTPRoute again", routeApplied)
	t.Logf("HTTPRoute applied again %.1fs after the CRD's install began", time.Since(installed).Seconds())

	// At rest: no write, and none after a restart.
	waitResyncs(t, 3, 30*time.Second)
	op.writes.take()
	waitResyncs(t, 3, 30*time.Second)
	if w := op.writes.take(); len(w) != 0 {
		t.Errorf("%d writes at rest: %q", len(w), w)
	}
	restartCostsNoWrites(t, op, ns)
}
