package controller

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/ssa"
)

// appliedTraffic is what the WebApp's route and Service, as our manager last applied them, send the canary's pods:
// what decides whether a canary's pods may go (never under traffic, and canary.Retire after the write that took it
// off them), in a reconcile's decision as in an Orphan deletion.
type appliedTraffic struct {
	// route: the route has a backend of the canary's Service, or mirrors to it (or what we own on it cannot be read,
	// and the route as it is does).
	route bool
	// service: the WebApp's Service selects the canary's pods (a blue/green's switch without a Gateway).
	service bool
	// changed is when our manager last changed the route, or the Service that is (or was) a blue/green's switch, by
	// the API server's clock, the later of both (zero: none of ours).
	changed time.Time
	// ownedRoute and ownedService are what our manager owns on them (nil: none, or not readable).
	ownedRoute   *gwv1ac.HTTPRouteApplyConfiguration
	ownedService *corev1ac.ServiceApplyConfiguration
}

// onCanary: the route or the Service sends the canary's pods traffic.
func (t appliedTraffic) onCanary() bool { return t.route || t.service }

// readCanaryTraffic reads app's route and Service (readChild: from the API server when the cache has not seen our
// last write of one, so pods just sent the traffic are never taken for pods it has left).
func (r *WebAppReconciler) readCanaryTraffic(ctx context.Context, app *webappv2.WebApp) (appliedTraffic, error) {
	var t appliedTraffic
	for _, c := range r.activeChildren() {
		if c.isVariant() || c.kind != "HTTPRoute" && c.kind != "Service" {
			continue
		}
		obj, err := r.readChild(ctx, c, app)
		switch {
		case err != nil:
			return t, &ssa.Error{Kind: c.kind, Key: types.NamespacedName{Namespace: app.Namespace, Name: c.objectName(app)}, Err: err, Read: true}
		case obj == nil:
		case c.kind == "Service":
			svc := obj.(*corev1.Service)
			if t.ownedService, err = corev1ac.ExtractService(svc, webappv2.FieldManager); err != nil || t.ownedService.Spec == nil {
				// What we own cannot be read: the Service as it is says.
				t.ownedService, t.service = nil, desired.SelectsCanary(app, svc.Spec.Selector)
			} else {
				t.service = desired.SelectsCanary(app, t.ownedService.Spec.Selector)
			}
			if t.service || !desired.Routed(app) {
				// Without a route, the Service is (or was, before the strategy changed) a blue/green's switch: its last
				// change may have just taken the traffic off the canary.
				t.changed = later(t.changed, appliedAt(obj))
			}
		default:
			route := obj.(*gwv1.HTTPRoute)
			t.changed = later(t.changed, appliedAt(obj))
			if t.ownedRoute, err = gwv1ac.ExtractHTTPRoute(route, webappv2.FieldManager); err != nil {
				// What we own cannot be read: the route as it is says.
				t.ownedRoute, t.route = nil, liveRoutesToCanary(route, app)
				continue
			}
			t.route = routesToCanary(t.ownedRoute, app)
		}
	}
	return t, nil
}

// readChild reads app's child of kind c (nil: none of app's): from the cache, or from the API server when the cache
// has not seen our last write of it.
func (r *WebAppReconciler) readChild(ctx context.Context, c childKind, app *webappv2.WebApp) (client.Object, error) {
	key := types.NamespacedName{Namespace: app.Namespace, Name: c.objectName(app)}
	obj := c.object()
	if err := r.Client.Get(ctx, key, obj); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if r.mem.Behind(c.id, client.ObjectKeyFromObject(app), obj) {
		// (Into a new object: a decoding into the cached one would keep the keys of its maps that are gone.)
		obj = c.object()
		if err := r.reader().Get(ctx, key, obj); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
	}
	if ssa.NotOursReason(obj, app) != "" {
		return nil, nil
	}
	return obj, nil
}

// routesToCanary: a rule of route has a backend of app's canary Service, or mirrors to it.
func routesToCanary(route *gwv1ac.HTTPRouteApplyConfiguration, app *webappv2.WebApp) bool {
	if route == nil || route.Spec == nil {
		return false
	}
	return slices.ContainsFunc(route.Spec.Rules, func(r gwv1ac.HTTPRouteRuleApplyConfiguration) bool {
		return slices.ContainsFunc(r.BackendRefs, func(b gwv1ac.HTTPBackendRefApplyConfiguration) bool { return toCanary(app, b) }) ||
			slices.ContainsFunc(r.Filters, func(f gwv1ac.HTTPRouteFilterApplyConfiguration) bool { return mirrorsToCanary(app, f) })
	})
}

// toCanary: b is the canary's Service.
func toCanary(app *webappv2.WebApp, b gwv1ac.HTTPBackendRefApplyConfiguration) bool {
	return b.Name != nil && string(*b.Name) == desired.CanaryName(app) && (b.Kind == nil || *b.Kind == "Service")
}

// mirrorsToCanary: f mirrors requests to the canary's Service.
func mirrorsToCanary(app *webappv2.WebApp, f gwv1ac.HTTPRouteFilterApplyConfiguration) bool {
	m := f.RequestMirror
	return m != nil && m.BackendRef != nil && m.BackendRef.Name != nil && string(*m.BackendRef.Name) == desired.CanaryName(app) &&
		(m.BackendRef.Kind == nil || *m.BackendRef.Kind == "Service")
}

// liveRoutesToCanary: a rule of the route as it is has a backend of app's canary Service, or mirrors to it.
func liveRoutesToCanary(route *gwv1.HTTPRoute, app *webappv2.WebApp) bool {
	return slices.ContainsFunc(route.Spec.Rules, func(r gwv1.HTTPRouteRule) bool {
		return slices.ContainsFunc(r.BackendRefs, func(b gwv1.HTTPBackendRef) bool { return string(b.Name) == desired.CanaryName(app) }) ||
			slices.ContainsFunc(r.Filters, func(f gwv1.HTTPRouteFilter) bool {
				return f.RequestMirror != nil && string(f.RequestMirror.BackendRef.Name) == desired.CanaryName(app)
			})
	})
}

// appliedAt is when our field manager's apply last changed obj, at the latest (zero: it owns nothing on it).
func appliedAt(obj client.Object) time.Time {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == webappv2.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" && e.Time != nil {
			// Stored in whole seconds: the change came within the second after.
			return e.Time.Add(time.Second)
		}
	}
	return time.Time{}
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
