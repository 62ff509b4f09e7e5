package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/pods"
	"github.com/example/webapp-operator/controller/ssa"
)

// An Orphan deletion mid-canary (issue 47): what is left running without an owner is the stable version alone,
// serving all the traffic. The canary's objects (the variants: its Deployment and Service) are the operator's
// alone, for the length of a canary; they are never released, but deleted once the route's traffic has left them.
// The step machine is not asked: which objects are the canary's is known by name and owner reference alone, so a
// canary that could not be decided (its config unreadable, its state unknown) is deleted all the same. A user who
// orphans a WebApp means "keep what serves"; an untried version nobody owns, still taking a share of the traffic,
// is the one thing nobody asked to keep. What the stable Deployment runs is what our manager owns on it, released
// as it is: the stable version during Canary and RolledBack (the template it holds), the promoted one during
// Promoting (it already runs, or rolls to, that version).

// orphanCanaryView is what an Orphan deletion sees of a canary.
type orphanCanaryView struct {
	// status is the WebApp's status.canary (nil: none was written, or no strategy), for the event's words.
	status *webappv2.CanaryStatus
	// objects name the canary's objects that exist and are the WebApp's ("Deployment web-canary").
	objects []string
	// routeToCanary: the route, as our manager owns it, has a backend of the canary's Service (or what we own on it
	// cannot be read: an apply repairs it).
	routeToCanary bool
	// serviceToCanary: the WebApp's Service, as our manager owns it, selects the canary's pods (a blue/green's switch
	// without a Gateway).
	serviceToCanary bool
	// retire is how long the canary's pods stay after the traffic left them (desired.CanaryRetire; 0: canary.Retire).
	retire time.Duration
	// routeChanged is when our manager last changed the route, or the Service that is a blue/green's switch, by the
	// API server's clock, the later of both (zero: none of ours).
	routeChanged time.Time
}

// orphanCanaryStep is what an Orphan deletion does next about a canary, in this order.
type orphanCanaryStep struct {
	// stableTraffic: apply the route with the stable Service as its only backend, and the Service with the stable
	// pods as its selector.
	stableTraffic bool
	// wait: the gateway follows the route's last change first; look again then (the canary stays meanwhile).
	wait time.Duration
	// deleteCanary: delete the canary's objects; note says why, for the event.
	deleteCanary bool
	note         string
}

// orphanCanary decides what an Orphan deletion does about a canary at now: traffic back to the stable Service
// first, then (retireSeconds after the route's last change, as after a rollback) the canary's objects deleted; with
// no canary and no traffic to one, nothing.
func orphanCanary(v orphanCanaryView, now time.Time) orphanCanaryStep {
	toCanary := v.routeToCanary || v.serviceToCanary
	after := v.retire
	if after <= 0 {
		after = canary.Retire
	}
	switch {
	case toCanary && len(v.objects) > 0:
		// Traffic first; the canary's pods keep answering the requests already on their way.
		return orphanCanaryStep{stableTraffic: true, wait: after}
	case toCanary:
		// A backend with nothing behind it: the stable Service gets its share, at once.
		return orphanCanaryStep{stableTraffic: true}
	case len(v.objects) == 0:
		return orphanCanaryStep{}
	}
	if !v.routeChanged.IsZero() {
		// Bounded by the retire: a clock ahead of ours never holds the deletion longer.
		if left := min(v.routeChanged.Add(after).Sub(now), after); left > 0 {
			return orphanCanaryStep{wait: left}
		}
	}
	return orphanCanaryStep{deleteCanary: true, note: orphanCanaryNote(v)}
}

// orphanCanaryNote says which of the canary's objects an Orphan deletion deleted, and what keeps running.
func orphanCanaryNote(v orphanCanaryView) string {
	what := "Deleted " + strings.Join(v.objects, " and ") + ": the WebApp was deleted with deletionPolicy Orphan"
	s := v.status
	switch {
	case s == nil || s.Phase == "":
		return what + ", and its canary's state is not known; a canary is never left running without an owner, and what the WebApp's own Deployment runs keeps running"
	case s.Phase == string(canary.PhaseCanary):
		return fmt.Sprintf("%s mid-canary: revision %s, never promoted, is not kept; revision %s keeps running without an owner and serves all the traffic", what, s.CanaryRevision, s.StableRevision)
	case s.Phase == string(canary.PhasePromoting):
		return fmt.Sprintf("%s while revision %s was promoted: the WebApp's own Deployment, rolled to it, keeps running without an owner and serves all the traffic", what, s.CanaryRevision)
	case s.Phase == string(canary.PhaseRolledBack):
		return fmt.Sprintf("%s while the pods of revision %s, rolled back, were retiring; revision %s keeps running without an owner and serves all the traffic", what, s.FailedRevision, s.StableRevision)
	}
	return fmt.Sprintf("%s; a canary's objects are never left running without an owner: revision %s keeps running and serves all the traffic", what, s.StableRevision)
}

// stableRoute is the route as our manager owns it (owned; nil: not readable, then the spec's) with the canary's
// traffic taken off: the stable Service the only backend of every rule that had the canary's, the rule of a step's
// matches (whose backends are all the canary's) gone, and a mirror to the canary gone. An Orphan deletion changes
// the route's traffic and nothing else of it (a spec change not yet applied does not roll out during a deletion).
// nil: no route.
func stableRoute(owned *gwv1ac.HTTPRouteApplyConfiguration, app *webappv2.WebApp) *gwv1ac.HTTPRouteApplyConfiguration {
	if owned == nil || owned.Spec == nil {
		return desired.HTTPRoute(app, canary.Traffic{})
	}
	out := &gwv1ac.HTTPRouteApplyConfiguration{}
	if err := desired.RoundTrip(owned, out); err != nil {
		return desired.HTTPRoute(app, canary.Traffic{})
	}
	rules := out.Spec.Rules[:0]
	for _, r := range out.Spec.Rules {
		canaryOnly := len(r.BackendRefs) > 0 && !slices.ContainsFunc(r.BackendRefs, func(b gwv1ac.HTTPBackendRefApplyConfiguration) bool { return !toCanary(app, b) })
		if canaryOnly {
			continue
		}
		r.Filters = slices.DeleteFunc(r.Filters, func(f gwv1ac.HTTPRouteFilterApplyConfiguration) bool { return mirrorsToCanary(app, f) })
		if slices.ContainsFunc(r.BackendRefs, func(b gwv1ac.HTTPBackendRefApplyConfiguration) bool { return toCanary(app, b) }) {
			r.BackendRefs = nil
			r.WithBackendRefs(desired.RouteBackends(app, 0)...)
		}
		rules = append(rules, r)
	}
	out.Spec.Rules = rules
	return out
}

// retireCanary, in an Orphan deletion, takes the traffic off a canary and then deletes its objects (orphanCanary
// says what comes next). It returns how long the gateway needs to follow the route before the canary may go.
func (r *WebAppReconciler) retireCanary(ctx context.Context, app *webappv2.WebApp) (time.Duration, error) {
	v, owned, ownedSvc, err := r.observeOrphanCanary(ctx, app)
	if err != nil {
		return 0, err
	}
	now := r.now().Time
	step := orphanCanary(v, now)
	if step.stableTraffic && v.serviceToCanary {
		// The one write of the Service that is a blue/green's switch: its selector back on the stable pods, the rest as
		// our manager owns it.
		want := stableService(ownedSvc, app)
		out, err := ssa.Ensure(ctx, r.writer(), "Service", client.ObjectKeyFromObject(app), func(*corev1.Service) *corev1ac.ServiceApplyConfiguration { return want },
			corev1ac.ExtractService, ssa.Opts{Owner: app, OnlyIfExists: true})
		if err != nil {
			r.event(app, childRef(app, *childOf("Service")), corev1.EventTypeWarning, "ApplyFailed", "Apply", "Sending the traffic back to the stable pods (Service %s's selector) failed: %v", app.Name, err)
			return 0, err
		}
		v.routeChanged = now
		if !out.Sent && out.Obj != nil {
			v.routeChanged = appliedAt(out.Obj)
		}
	}
	if step.stableTraffic && v.routeToCanary {
		if want := stableRoute(owned, app); want != nil {
			// The one write of the route: compared with what our manager owns, never creating one that is gone.
			out, err := ssa.Ensure(ctx, r.writer(), "HTTPRoute", client.ObjectKeyFromObject(app), func(*gwv1.HTTPRoute) *gwv1ac.HTTPRouteApplyConfiguration { return want },
				gwv1ac.ExtractHTTPRoute, ssa.Opts{Owner: app, OnlyIfExists: true})
			if err != nil {
				r.event(app, childRef(app, *childOf("HTTPRoute")), corev1.EventTypeWarning, "ApplyFailed", "Apply", "Sending the route's traffic back to Service %s failed: %v", app.Name, err)
				return 0, err
			}
			// Just changed, or found changed already (the cache was behind our write): since when, by the server.
			v.routeChanged = now
			if !out.Sent && out.Obj != nil {
				v.routeChanged = appliedAt(out.Obj)
			}
		}
	}
	if step.stableTraffic {
		// Decided again on the route and the Service as they are now (or as the spec says no route should exist).
		v.routeToCanary, v.serviceToCanary = false, false
		step = orphanCanary(v, now)
	}
	if !step.deleteCanary {
		return step.wait, nil
	}
	var errs []error
	for _, c := range r.activeChildren() {
		if c.isVariant() {
			// With the UID seen, as any deletion of a child (a canary object the cache has not seen keeps our owner
			// reference: the garbage collector deletes it after the WebApp).
			_, err := deleteChild(ctx, r, c, app)
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		r.event(app, nil, corev1.EventTypeWarning, "DeleteFailed", "Delete", "Deleting the canary of an Orphan deletion failed: %v", err)
		return 0, err
	}
	r.event(app, nil, corev1.EventTypeNormal, webappv2.ReasonCanaryRemoved, "Delete", "%s", pods.TruncateTo(step.note, 1000))
	return 0, nil
}

// observeOrphanCanary reads the canary's objects that are app's, and what the route and the Service, as our manager
// owns them, send the canary (readCanaryTraffic).
func (r *WebAppReconciler) observeOrphanCanary(ctx context.Context, app *webappv2.WebApp) (orphanCanaryView, *gwv1ac.HTTPRouteApplyConfiguration, *corev1ac.ServiceApplyConfiguration, error) {
	v := orphanCanaryView{status: app.Status.Canary, retire: desired.CanaryRetire(app)}
	for _, c := range r.activeChildren() {
		if !c.isVariant() {
			continue
		}
		switch obj, err := r.cachedChild(ctx, c, app); {
		case err != nil:
			return v, nil, nil, &ssa.Error{Kind: c.kind, Key: types.NamespacedName{Namespace: app.Namespace, Name: c.objectName(app)}, Err: err, Read: true}
		case obj != nil:
			v.objects = append(v.objects, c.kind+" "+c.objectName(app))
		}
	}
	t, err := r.readCanaryTraffic(ctx, app)
	if err != nil {
		return v, nil, nil, err
	}
	v.routeToCanary, v.serviceToCanary, v.routeChanged = t.route, t.service, t.changed
	return v, t.ownedRoute, t.ownedService, nil
}

// stableService is the Service as our manager owns it (owned; nil: not readable, then the spec's without a canary's
// traffic) with its selector on the stable pods: an Orphan deletion changes the Service's selector and nothing else.
func stableService(owned *corev1ac.ServiceApplyConfiguration, app *webappv2.WebApp) *corev1ac.ServiceApplyConfiguration {
	out := &corev1ac.ServiceApplyConfiguration{}
	if owned == nil || owned.Spec == nil || desired.RoundTrip(owned, out) != nil {
		return desired.Service(app, canary.Traffic{})
	}
	out.Spec.Selector = desired.SelectorLabels(app)
	return out
}
