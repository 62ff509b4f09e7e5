package desired

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/controller/internal/apptest"
)

func TestCanaryReplicas(t *testing.T) {
	cases := []struct {
		stable, bound, weight int32
		shared                bool
		want                  int32
	}{
		{stable: 4, bound: 4, weight: 0, want: 0},
		{stable: 4, bound: 4, weight: 10, want: 1}, // behind a route: at least one
		{stable: 4, bound: 4, weight: 50, want: 2},
		{stable: 10, bound: 10, weight: 25, want: 3}, // 2.5 rounded up
		{stable: 3, bound: 3, weight: 99, want: 3},
		{stable: 4, bound: 4, weight: 10, shared: true, want: 1},  // 1 of 5 pods: 20% >= 10%
		{stable: 4, bound: 4, weight: 50, shared: true, want: 4},  // 4 of 8
		{stable: 3, bound: 3, weight: 25, shared: true, want: 1},  // 1 of 4
		{stable: 9, bound: 9, weight: 20, shared: true, want: 3},  // 9*20/80 = 2.25 -> 3: 3 of 12 = 25%
		{stable: 2, bound: 2, weight: 100, shared: true, want: 2}, // the whole share: as many as stable
		{stable: 0, bound: 1, weight: 30, shared: true, want: 1},  // nothing stable: still one canary pod
		{stable: 20, bound: 20, weight: 1, want: 1},               // 0.2 rounded up
		{stable: 4, bound: 0, weight: 50, shared: true, want: 1},  // at least one, whatever the bound
		// The bound: never more canary pods than the WebApp may run.
		{stable: 10, bound: 10, weight: 99, shared: true, want: 10},    // not 990: half the pods
		{stable: 10, bound: 10, weight: 75, shared: true, want: 10},    // not 30
		{stable: 10, bound: 10, weight: 50, shared: true, want: 10},    // exactly the bound: 50%
		{stable: 100, bound: 100, weight: 99, shared: true, want: 100}, // an HPA at its maximum of 100: not 9,900
		{stable: 2, bound: 100, weight: 90, shared: true, want: 18},    // an HPA at 2 of at most 100: the share is reached
		{stable: 1000, bound: 100, weight: 99, shared: true, want: 100},
		{stable: 100, bound: 100, weight: 99, want: 99}, // behind a route: below the bound already
		{stable: 2147483647, bound: 2147483647, weight: 99, shared: true, want: 2147483647},
	}
	for _, c := range cases {
		got := CanaryReplicas(c.stable, c.bound, c.weight, c.shared)
		if got != c.want {
			t.Errorf("canaryReplicas(%d, bound %d, %d%%, shared %v) = %d, want %d", c.stable, c.bound, c.weight, c.shared, got, c.want)
		}
		if c.weight > 0 && got > max(c.bound, 1) {
			t.Errorf("canaryReplicas(%d, bound %d, %d%%, shared %v) = %d: above the bound", c.stable, c.bound, c.weight, c.shared, got)
		}
	}
}

func TestCanaryBound(t *testing.T) {
	cases := []struct {
		name        string
		replicas    int32
		autoscaling *webappv2.Autoscaling
		want        int32
	}{
		{name: "the WebApp's replicas", replicas: 10, want: 10},
		{name: "autoscaling: its maximum", replicas: 3, autoscaling: &webappv2.Autoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 100}, want: 100},
		{name: "autoscaling below the replicas: its maximum", replicas: 10, autoscaling: &webappv2.Autoscaling{MaxReplicas: 4}, want: 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			app := apptest.NewApp("shop", c.replicas, 8080, "shop:2")
			app.Spec.Autoscaling = c.autoscaling
			if got := CanaryBound(app); got != c.want {
				t.Errorf("canaryBound = %d, want %d", got, c.want)
			}
		})
	}
}

func TestDesiredCanaryDeployment(t *testing.T) {
	gateway := func(app *webappv2.WebApp) {
		app.Spec.Expose = &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Gateway: &webappv2.GatewayRef{Name: "gw"}}
	}
	cases := []struct {
		name         string
		set          func(*webappv2.WebApp)
		d            canary.Decision
		stable       int32
		wantNil      bool
		wantReplicas int32
		wantInstance bool // the canary's pods carry the stable pods' instance label (the one Service selects them)
	}{
		{name: "no canary: none", d: canary.Decision{Phase: canary.PhaseStable}, wantNil: true},
		{name: "rolled back: none", d: canary.Decision{Phase: canary.PhaseRolledBack}, wantNil: true},
		{name: "shared Service: by replicas, selected by the one Service", d: canary.Decision{State: canary.State{Canary: "r2"}, Phase: canary.PhaseCanary, ReplicaWeight: 25}, stable: 3, wantReplicas: 1, wantInstance: true},
		{name: "behind a route: its own pods", set: gateway, d: canary.Decision{Phase: canary.PhaseCanary, ReplicaWeight: 50}, stable: 4, wantReplicas: 2},
		{name: "promoting: kept at its weight", set: gateway, d: canary.Decision{Phase: canary.PhasePromoting, ReplicaWeight: 50}, stable: 4, wantReplicas: 2},
		{name: "shared Service at 99%: bounded by the WebApp's replicas", d: canary.Decision{State: canary.State{Canary: "r2"}, Phase: canary.PhaseCanary, ReplicaWeight: 99}, stable: 3, wantReplicas: 3, wantInstance: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			app := apptest.NewApp("shop", 3, 8080, "shop:2")
			if c.set != nil {
				c.set(app)
			}
			dep, err := CanaryDeployment(app, Inputs{ConfigHash: "h"}, c.d, c.stable, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.wantNil {
				if dep != nil {
					t.Fatalf("a canary Deployment without a canary: %s", apptest.JSON(t, dep))
				}
				return
			}
			stable, err := Deployment(app, Inputs{ConfigHash: "h"})
			if err != nil {
				t.Fatal(err)
			}
			if *dep.Name != "shop-canary" || *dep.Spec.Replicas != c.wantReplicas {
				t.Errorf("name %s replicas %d, want shop-canary %d", *dep.Name, *dep.Spec.Replicas, c.wantReplicas)
			}
			sel := dep.Spec.Selector.MatchLabels
			if !maps.Equal(sel, map[string]string{webappv2.LabelName: webappv2.AppName, webappv2.LabelCanaryOf: "shop"}) {
				t.Errorf("selector %v", sel)
			}
			labels := dep.Spec.Template.Labels
			for k, v := range sel {
				if labels[k] != v {
					t.Errorf("the template's labels %v do not match the selector %v", labels, sel)
				}
			}
			if labels[webappv2.LabelCanaryRevision] != c.d.State.Canary {
				t.Errorf("the canary's pods say revision %q, want %q", labels[webappv2.LabelCanaryRevision], c.d.State.Canary)
			}
			_, hasInstance := labels[webappv2.LabelInstance]
			if hasInstance != c.wantInstance {
				t.Errorf("instance label on the canary's pods: %v, want %v (labels %v)", hasInstance, c.wantInstance, labels)
			}
			// The stable Deployment's selector must not select the canary's pods behind a route.
			if matches(stable.Spec.Selector.MatchLabels, labels) != c.wantInstance {
				t.Errorf("the stable selector %v selects the canary's pods %v: %v", stable.Spec.Selector.MatchLabels, labels, !c.wantInstance)
			}
			// The same pod spec as the spec asks for now: the canary is the new version.
			if apptest.JSON(t, dep.Spec.Template.Spec) != apptest.JSON(t, stable.Spec.Template.Spec) || apptest.JSON(t, dep.Spec.Template.Annotations) != apptest.JSON(t, stable.Spec.Template.Annotations) {
				t.Errorf("the canary's pod differs from the spec's:\n%s\n%s", apptest.JSON(t, dep.Spec.Template), apptest.JSON(t, stable.Spec.Template))
			}
			// Building the canary leaves the stable Deployment's own labels alone.
			if again, _ := Deployment(app, Inputs{ConfigHash: "h"}); apptest.JSON(t, again) != apptest.JSON(t, stable) {
				t.Errorf("building the canary changed the stable Deployment")
			}
		})
	}
}

// The version kept warm runs the record's pod template under the canary's labels: exactly the Deployment the
// canary of that spec would be, so the way back to it (its revision's canary, promoted at 100) rolls no pod.
func TestAWarmDeploymentIsTheCanaryOfTheVersionBefore(t *testing.T) {
	before := apptest.Exposed(webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Gateway: &webappv2.GatewayRef{Name: "gw"}})
	before.Spec.Image = "shop:1"
	now := before.DeepCopy()
	now.Spec.Image = "shop:2"
	old, err := Deployment(before, Inputs{ConfigHash: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := Revision(old.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	record := apptest.JSON(t, old.Spec.Template)
	warm := canary.Decision{Phase: canary.PhaseStable, Warm: rev, ReplicaWeight: 100, State: canary.State{Stable: "r2", Previous: rev}}
	dep, err := CanaryDeployment(now, Inputs{ConfigHash: "h2"}, warm, WebAppReplicas(now), old.Spec.Template)
	if err != nil || dep == nil {
		t.Fatalf("no warm Deployment: %v", err)
	}
	if got := apptest.JSON(t, old.Spec.Template); got != record {
		t.Errorf("building the warm Deployment changed the record's template:\n%s\n%s", got, record)
	}
	// The way back: the spec is the version before again, its canary promoted at all of the traffic.
	back := canary.Decision{Phase: canary.PhasePromoting, ReplicaWeight: 100, State: canary.State{Stable: "r2", Canary: rev}}
	want, err := CanaryDeployment(before, Inputs{ConfigHash: "h1"}, back, WebAppReplicas(now), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, w := apptest.JSON(t, dep), apptest.JSON(t, want); got != w {
		t.Errorf("the warm Deployment is not the way back's:\n got %s\nwant %s", got, w)
	}
	if n := WebAppReplicas(now); *dep.Spec.Replicas != n || dep.Spec.Template.Spec.Containers[0].Image == nil || *dep.Spec.Template.Spec.Containers[0].Image != "shop:1" {
		t.Errorf("warm: %d pods of %s, want %d of shop:1", *dep.Spec.Replicas, apptest.JSON(t, dep.Spec.Template.Spec.Containers[0].Image), n)
	}
	// Its template not known (no record of it): no Deployment rather than the spec's version under its name.
	if dep, err := CanaryDeployment(now, Inputs{ConfigHash: "h2"}, warm, 4, nil); err != nil || dep != nil {
		t.Errorf("a warm Deployment without its template: %v %v", dep, err)
	}
}

func TestDesiredCanaryServiceAndRoute(t *testing.T) {
	app := apptest.Exposed(webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Gateway: &webappv2.GatewayRef{Name: "gw"}})
	if svc := CanaryService(app, canary.Decision{Phase: canary.PhaseStable}); svc != nil {
		t.Errorf("a canary Service without a canary")
	}
	svc := CanaryService(app, canary.Decision{Phase: canary.PhaseCanary, ReplicaWeight: 10})
	want := `{"kind":"Service","apiVersion":"v1","metadata":{"name":"shop-canary","namespace":"ns","labels":{"app.kubernetes.io/instance":"shop","app.kubernetes.io/managed-by":"webapp-operator","app.kubernetes.io/name":"webapp"},` +
		`"ownerReferences":[{"apiVersion":"example.com/v1","kind":"WebApp","name":"shop","uid":"uid-shop","controller":true,"blockOwnerDeletion":true}]},` +
		`"spec":{"ports":[{"name":"http","protocol":"TCP","port":8080,"targetPort":"http"},{"name":"metrics","protocol":"TCP","port":9090,"targetPort":"metrics"}],` +
		`"selector":{"app.kubernetes.io/name":"webapp","webapp.example.com/canary-of":"shop"},"type":"ClusterIP"}}`
	if got := apptest.JSON(t, svc); got != want {
		t.Errorf("canary Service:\n got %s\nwant %s", got, want)
	}
	shared := apptest.NewApp("shop", 3, 8080, "shop:2")
	if svc := CanaryService(shared, canary.Decision{Phase: canary.PhaseCanary, ReplicaWeight: 10}); svc != nil {
		t.Errorf("a canary Service without a Gateway: the one Service serves both")
	}

	// The route without a canary is the route as it has always been written: taking the strategy rewrites none.
	if got := apptest.JSON(t, RouteBackends(app, 0)); got != `[{"group":"","kind":"Service","name":"shop","port":8080,"weight":1}]` {
		t.Errorf("backends without a canary: %s", got)
	}
	if got := apptest.JSON(t, RouteBackends(app, 30)); got != `[{"group":"","kind":"Service","name":"shop","port":8080,"weight":70},{"group":"","kind":"Service","name":"shop-canary","port":8080,"weight":30}]` {
		t.Errorf("backends at 30%%: %s", got)
	}
}

func TestRevision(t *testing.T) {
	app := apptest.NewApp("shop", 3, 8080, "shop:1")
	rev := func(app *webappv2.WebApp, hash string) string {
		t.Helper()
		tmpl, err := PodTemplate(app, hash)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Revision(tmpl)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a := rev(app, "h1")
	if again := rev(app, "h1"); again != a || len(a) != 16 {
		t.Errorf("the same spec: %q then %q", a, again)
	}
	if rev(app, "h2") == a {
		t.Errorf("a new config hash is not a new revision")
	}
	next := app.DeepCopy()
	next.Spec.Image = "shop:2"
	if rev(next, "h1") == a {
		t.Errorf("a new image is not a new revision")
	}
	scaled := app.DeepCopy()
	scaled.Spec.Replicas = ptr.To[int32](7)
	if rev(scaled, "h1") != a {
		t.Errorf("a new count is a new revision: only the pods' template makes one")
	}
}

func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// Without a Gateway, a blue/green's switch is the WebApp's Service: its selector is the canary's pods' exactly
// while the canary is sent all the traffic, and the canary's pods are never the stable selector's, so a preview
// serves none of the production traffic.
func TestTheServiceIsABlueGreensSwitchWithoutAGateway(t *testing.T) {
	blueGreen := func(app *webappv2.WebApp) {
		app.Spec.Rollout.Canary = &webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{}}
	}
	steps := func(app *webappv2.WebApp) {
		app.Spec.Rollout.Canary = &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 50}}}
	}
	gateway := func(app *webappv2.WebApp) {
		app.Spec.Expose = &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Gateway: &webappv2.GatewayRef{Name: "gw"}}
	}
	ingress := func(app *webappv2.WebApp) {
		app.Spec.Expose = &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Ingress: &webappv2.IngressRef{}}
	}
	preview := canary.Decision{State: canary.State{Canary: "r2"}, Phase: canary.PhaseCanary, ReplicaWeight: 100}
	switched := preview
	switched.Traffic = canary.Traffic{Weight: 100}
	cases := []struct {
		name      string
		set       []func(*webappv2.WebApp)
		d         canary.Decision
		toCanary  bool // the Service selects the canary's pods, not the stable ones
		canarySvc bool // the canary's own Service exists (the preview's, or the route's backend)
	}{
		{name: "blue/green, preview: the stable pods", set: []func(*webappv2.WebApp){blueGreen}, d: preview, canarySvc: true},
		{name: "blue/green, switched: the canary's pods", set: []func(*webappv2.WebApp){blueGreen}, d: switched, toCanary: true, canarySvc: true},
		{name: "blue/green behind an Ingress, switched: the canary's pods", set: []func(*webappv2.WebApp){blueGreen, ingress}, d: switched, toCanary: true, canarySvc: true},
		{name: "blue/green behind a Gateway, switched: the route switches, the Service stays", set: []func(*webappv2.WebApp){blueGreen, gateway}, d: switched, canarySvc: true},
		{name: "steps without a Gateway: split by replicas, one Service", set: []func(*webappv2.WebApp){steps}, d: canary.Decision{State: canary.State{Canary: "r2"}, Phase: canary.PhaseCanary, ReplicaWeight: 50, Traffic: canary.Traffic{Weight: 50}}},
		{name: "blue/green, promoted: back to the stable pods, the canary's retiring", set: []func(*webappv2.WebApp){blueGreen}, d: canary.Decision{State: canary.State{Stable: "r2", Retiring: "r2"}, Phase: canary.PhaseStable}, canarySvc: true},
		{name: "no strategy", d: canary.Decision{Phase: canary.PhaseStable}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			app := apptest.NewApp("shop", 3, 8080, "shop:2")
			for _, set := range c.set {
				set(app)
			}
			svc := apptest.Typed[corev1.Service](t, Service(app, c.d.Traffic))
			stable, err := Deployment(app, Inputs{ConfigHash: "h"})
			if err != nil {
				t.Fatal(err)
			}
			if got := matches(svc.Spec.Selector, stable.Spec.Template.Labels); got == c.toCanary {
				t.Errorf("the Service %v selects the stable pods: %v, want %v", svc.Spec.Selector, got, !c.toCanary)
			}
			if c.d.ReplicaWeight > 0 {
				dep, err := CanaryDeployment(app, Inputs{ConfigHash: "h"}, c.d, 3, nil)
				if err != nil {
					t.Fatal(err)
				}
				// Shared by replicas, the one Service selects both; otherwise exactly one version.
				want := c.toCanary || CanaryShared(app)
				if got := matches(svc.Spec.Selector, dep.Spec.Template.Labels); got != want {
					t.Errorf("the Service %v selects the canary's pods %v: %v, want %v", svc.Spec.Selector, dep.Spec.Template.Labels, got, want)
				}
			}
			if got := CanaryService(app, c.d) != nil; got != c.canarySvc {
				t.Errorf("a canary Service: %v, want %v", got, c.canarySvc)
			}
			// Everything but the selector is the Service as it has always been written: a switch changes nothing else.
			plain := apptest.Typed[corev1.Service](t, Service(app, canary.Traffic{}))
			svc.Spec.Selector, plain.Spec.Selector = nil, nil
			if got, want := apptest.JSON(t, svc), apptest.JSON(t, plain); got != want {
				t.Errorf("the switch changed more than the selector:\n got %s\nwant %s", got, want)
			}
		})
	}
}
