package controller

import (
	"maps"
	"strings"
	"testing"
	"time"

	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/internal/apptest"
)

func TestOrphanCanary(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	both := []string{"Deployment shop-canary", "Service shop-canary"}
	midCanary := &webappv2.CanaryStatus{Phase: "Canary", StableRevision: "s1", CanaryRevision: "c2", Step: 1, Weight: 50}
	switched := &webappv2.CanaryStatus{Phase: "Canary", StableRevision: "s1", CanaryRevision: "c2", Step: 1, Weight: 100}
	cases := []struct {
		name string
		view orphanCanaryView
		want orphanCanaryStep
		note []string // fragments of the event's note
	}{
		{"no canary, a route to the stable Service", orphanCanaryView{status: &webappv2.CanaryStatus{Phase: "Stable", StableRevision: "s1"}, routeChanged: now.Add(-time.Hour)},
			orphanCanaryStep{}, nil},
		{"no strategy, nothing", orphanCanaryView{}, orphanCanaryStep{}, nil},
		{"mid-canary behind a route: traffic first, then wait for the gateway", orphanCanaryView{status: midCanary, objects: both, routeToCanary: true, routeChanged: now.Add(-time.Minute)},
			orphanCanaryStep{stableTraffic: true, wait: canary.Retire}, nil},
		{"the route changed 3 s ago: the canary waits 7 s more", orphanCanaryView{status: midCanary, objects: both, routeChanged: now.Add(-3 * time.Second)},
			orphanCanaryStep{wait: 7 * time.Second}, nil},
		{"the route changed 10 s ago: the canary goes", orphanCanaryView{status: midCanary, objects: both, routeChanged: now.Add(-canary.Retire)},
			orphanCanaryStep{deleteCanary: true}, []string{"Deleted Deployment shop-canary and Service shop-canary", "mid-canary", "revision c2, never promoted, is not kept", "revision s1 keeps running"}},
		{"a server clock ahead never holds it longer than canary.Retire", orphanCanaryView{status: midCanary, objects: both, routeChanged: now.Add(time.Hour)},
			orphanCanaryStep{wait: canary.Retire}, nil},
		{"shared Service (no route): the canary goes at once", orphanCanaryView{status: midCanary, objects: both[:1]},
			orphanCanaryStep{deleteCanary: true}, []string{"Deleted Deployment shop-canary:", "mid-canary"}},
		{"a canary at weight 0 never had traffic: it goes at once", orphanCanaryView{status: &webappv2.CanaryStatus{Phase: "Canary", StableRevision: "s1", CanaryRevision: "c2"}, objects: both, routeChanged: now.Add(-time.Hour)},
			orphanCanaryStep{deleteCanary: true}, []string{"mid-canary"}},
		{"promoting: the promoted version is kept", orphanCanaryView{status: &webappv2.CanaryStatus{Phase: "Promoting", StableRevision: "s1", CanaryRevision: "c2", Step: 2, Weight: 50}, objects: both, routeChanged: now.Add(-time.Hour)},
			orphanCanaryStep{deleteCanary: true}, []string{"while revision c2 was promoted", "rolled to it"}},
		{"rolled back, its pods retiring", orphanCanaryView{status: &webappv2.CanaryStatus{Phase: "RolledBack", StableRevision: "s1", FailedRevision: "c2"}, objects: both[:1], routeChanged: now.Add(-2 * time.Second)},
			orphanCanaryStep{wait: 8 * time.Second}, nil},
		{"rolled back, retired enough", orphanCanaryView{status: &webappv2.CanaryStatus{Phase: "RolledBack", StableRevision: "s1", FailedRevision: "c2"}, objects: both[:1], routeChanged: now.Add(-time.Minute)},
			orphanCanaryStep{deleteCanary: true}, []string{"revision c2, rolled back", "revision s1 keeps running"}},
		{"state unknown: deleted all the same, and said", orphanCanaryView{objects: both},
			orphanCanaryStep{deleteCanary: true}, []string{"its canary's state is not known", "never left running without an owner"}},
		{"leftovers of a finished canary", orphanCanaryView{status: &webappv2.CanaryStatus{Phase: "Stable", StableRevision: "s1"}, objects: both[1:]},
			orphanCanaryStep{deleteCanary: true}, []string{"Deleted Service shop-canary", "revision s1 keeps running"}},
		{"a route to a canary already gone: the stable Service gets it at once", orphanCanaryView{status: midCanary, routeToCanary: true},
			orphanCanaryStep{stableTraffic: true}, nil},
		{"a blue/green switched by the Service (no route): traffic first, then wait for the proxies", orphanCanaryView{status: switched, objects: both, serviceToCanary: true, routeChanged: now.Add(-time.Minute)},
			orphanCanaryStep{stableTraffic: true, wait: canary.Retire}, nil},
		{"the Service switched back 4 s ago: the canary waits 6 s more", orphanCanaryView{status: switched, objects: both, routeChanged: now.Add(-4 * time.Second)},
			orphanCanaryStep{wait: 6 * time.Second}, nil},
		{"retireSeconds 30, the route changed 12 s ago: the canary waits 18 s more", orphanCanaryView{status: midCanary, objects: both, retire: 30 * time.Second, routeChanged: now.Add(-12 * time.Second)},
			orphanCanaryStep{wait: 18 * time.Second}, nil},
		{"retireSeconds 30, mid-canary behind a route: traffic first, then wait 30 s", orphanCanaryView{status: midCanary, objects: both, retire: 30 * time.Second, routeToCanary: true},
			orphanCanaryStep{stableTraffic: true, wait: 30 * time.Second}, nil},
		{"the Service switched back long ago: the canary goes", orphanCanaryView{status: switched, objects: both, routeChanged: now.Add(-time.Minute)},
			orphanCanaryStep{deleteCanary: true}, []string{"Deleted Deployment shop-canary and Service shop-canary", "mid-canary"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := orphanCanary(tc.view, now)
			note := got.note
			got.note = ""
			if got != tc.want {
				t.Errorf("orphanCanary = %+v, want %+v", got, tc.want)
			}
			if (note != "") != tc.want.deleteCanary {
				t.Errorf("note %q with deleteCanary %v", note, tc.want.deleteCanary)
			}
			for _, w := range tc.note {
				if !strings.Contains(note, w) {
					t.Errorf("note %q does not contain %q", note, w)
				}
			}
		})
	}
}

func TestStableRoute(t *testing.T) {
	gw := webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public"}}
	cases := []struct {
		name      string
		owned     func(app *webappv2.WebApp) *gwv1ac.HTTPRouteApplyConfiguration // the route our manager owns (nil: unreadable)
		spec      *webappv2.Expose
		toCanary  bool
		want      []string // fragments of the JSON; none: no route
		notInJSON []string
	}{
		{"mid-canary: the stable Service alone, at weight 1", func(app *webappv2.WebApp) *gwv1ac.HTTPRouteApplyConfiguration {
			return desired.HTTPRoute(app, canary.Traffic{Weight: 25})
		}, &gw, true, []string{
			`"backendRefs":[{"group":"","kind":"Service","name":"shop","port":8080,"weight":1}]`,
			`"ownerReferences":[{"apiVersion":"example.com/v1","kind":"WebApp","name":"shop","uid":"uid-shop"`,
		}, []string{"shop-canary"}},
		// Only the traffic changes: the hosts our manager owns stay, whatever the spec says now.
		{"a spec change not yet applied does not roll out", func(app *webappv2.WebApp) *gwv1ac.HTTPRouteApplyConfiguration {
			old := app.DeepCopy()
			old.Spec.Expose.Hosts = []webappv2.Hostname{"old.example.com"}
			return desired.HTTPRoute(old, canary.Traffic{Weight: 50})
		}, &gw, true, []string{`"hostnames":["old.example.com"]`, `"name":"shop","port":8080,"weight":1}]`}, []string{"a.example.com", "shop-canary"}},
		{"no canary backend: as owned", func(app *webappv2.WebApp) *gwv1ac.HTTPRouteApplyConfiguration {
			return desired.HTTPRoute(app, canary.Traffic{})
		}, &gw, false, []string{`"name":"shop","port":8080,"weight":1}]`}, nil},
		// A step's matches and mirror go with the canary; expose's rule keeps whatever else it has.
		{"matches and a mirror: the canary's rule and the mirror gone", func(app *webappv2.WebApp) *gwv1ac.HTTPRouteApplyConfiguration {
			return desired.HTTPRoute(app, canary.Traffic{Weight: 10, Mirror: 50, Matches: []webappv2.CanaryMatch{{Headers: []webappv2.CanaryHeaderMatch{{Name: "X-Canary", Value: "1"}}}}})
		}, &gw, true, []string{`"rules":[{"matches":[{"path":{"type":"PathPrefix","value":"/"}}],"backendRefs":[{"group":"","kind":"Service","name":"shop","port":8080,"weight":1}]}]`}, []string{"shop-canary", "X-Canary", "filters"}},
		{"a mirror alone at weight 0", func(app *webappv2.WebApp) *gwv1ac.HTTPRouteApplyConfiguration {
			return desired.HTTPRoute(app, canary.Traffic{Mirror: 100})
		}, &gw, true, []string{`"backendRefs":[{"group":"","kind":"Service","name":"shop","port":8080,"weight":1}]`}, []string{"shop-canary", "filters"}},
		{"what we own unreadable: the spec's at weight 0", func(*webappv2.WebApp) *gwv1ac.HTTPRouteApplyConfiguration { return nil }, &gw, false, []string{`"hostnames":["a.example.com"]`, `"weight":1}]`}, nil},
		{"unreadable, and the spec has no route", func(*webappv2.WebApp) *gwv1ac.HTTPRouteApplyConfiguration { return nil }, nil, false, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app := apptest.Exposed(gw)
			route := tc.owned(app)
			app.Spec.Expose = tc.spec
			if got := routesToCanary(route, app); got != tc.toCanary {
				t.Errorf("routesToCanary = %v, want %v", got, tc.toCanary)
			}
			out := stableRoute(route, app)
			if tc.want == nil {
				if out != nil {
					t.Fatalf("a route: %s", apptest.JSON(t, out))
				}
				return
			}
			got := apptest.JSON(t, out)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%s\ndoes not contain\n%s", got, w)
				}
			}
			for _, w := range tc.notInJSON {
				if strings.Contains(got, w) {
					t.Errorf("%s\ncontains\n%s", got, w)
				}
			}
			if routesToCanary(out, app) {
				t.Errorf("still routes to the canary: %s", got)
			}
		})
	}
}

// An Orphan deletion during a blue/green's switch without a Gateway puts the Service's selector back on the stable
// pods, and changes nothing else of it: a spec change not yet applied does not roll out.
func TestTheStableServiceOfAnOrphanDeletion(t *testing.T) {
	app := apptest.NewApp("shop", 3, 8080, "shop:2")
	app.Spec.Rollout.Canary = &webappv2.CanarySpec{BlueGreen: &webappv2.BlueGreenSpec{}}
	old := app.DeepCopy()
	old.Spec.Service.Annotations = map[string]string{"team": "a"}
	switched := desired.Service(old, canary.Traffic{Weight: 100})
	if !desired.SelectsCanary(app, switched.Spec.Selector) {
		t.Fatalf("the switched Service does not select the canary: %v", switched.Spec.Selector)
	}
	out := stableService(switched, app)
	if !maps.Equal(out.Spec.Selector, desired.SelectorLabels(app)) {
		t.Errorf("selector %v, want the stable pods' %v", out.Spec.Selector, desired.SelectorLabels(app))
	}
	if out.Annotations["team"] != "a" {
		t.Errorf("the owned Service's other fields changed: %s", apptest.JSON(t, out))
	}
	if desired.SelectsCanary(app, out.Spec.Selector) || !desired.SelectsCanary(app, switched.Spec.Selector) {
		t.Errorf("still selects the canary, or the owned Service was changed")
	}
	// What we own unreadable: the spec's Service, on the stable pods.
	if got, want := apptest.JSON(t, stableService(nil, app)), apptest.JSON(t, desired.Service(app, canary.Traffic{})); got != want {
		t.Errorf("unreadable:\n got %s\nwant %s", got, want)
	}
}
