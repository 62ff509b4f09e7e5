package controller

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/ssa"
)

// children are the kinds of child a WebApp has, each declared once. Everything the controller does with a kind
// follows from its entry: the write decision (ensure) and its events and metrics, the deletion of an optional child
// the WebApp no longer needs, the release on an Orphan deletion, the watch (Owns), the cache's label selector and
// transform, the resync's fingerprint, the retained fields in status, and the related object of events. Adding a
// kind is one entry here, its builder in controller/desired with its table tests, and its RBAC marker in
// webapp_controller.go.
var children = expand([]childKind{
	declare("Deployment", "apps/v1", false, func(app *webappv2.WebApp, in inputs) (*appsv1ac.DeploymentApplyConfiguration, error) {
		if in.configErr != nil {
			// Without its config hash the Deployment is left as it is: a guess would roll the pods.
			return nil, in.configErr
		}
		if in.hpaErr != nil {
			// Without knowing whether the HPA exists, who owns the count is not known: a guess could reset it.
			return nil, in.hpaErr
		}
		if in.claimErr != nil {
			// The pods would mount a claim that cannot be the WebApp's (or one that could not be read): held as it is.
			return nil, in.claimErr
		}
		return desiredStableDeployment(app, in)
	}, appsv1ac.ExtractDeployment).
		// With a canary strategy, the new version's Deployment beside the stable one while a canary runs; a canary
		// of another version replaces it rather than roll it (canaryReplaced).
		alsoAs("canary", desired.CanaryName, buildCanaryDeployment).
		variantReplacedWhen(canaryReplaced).
		// A new config hash on an existing Deployment is a config rollout, not drift.
		withConfigHash(func(o client.Object) string {
			return o.(*appsv1.Deployment).Spec.Template.Annotations[webappv2.ConfigHashAnnotation]
		}).
		// A Recreate strategy first takes over the defaulted rollingUpdate; the HPA exists: the count passes to it
		// without a reset.
		withHandover(func(ctx context.Context, r *WebAppReconciler, app *webappv2.WebApp, in inputs, cur client.Object) (bool, error) {
			strategy, err := handOverStrategy(ctx, r, app, cur.(*appsv1.Deployment))
			if err != nil {
				return strategy, err
			}
			count, err := handOverReplicas(ctx, r, app, in, cur)
			return strategy || count, err
		}),
	declare("Service", "v1", false, func(app *webappv2.WebApp, in inputs) (*corev1ac.ServiceApplyConfiguration, error) {
		traffic, err := canaryTraffic(in)
		if err != nil && desired.CanarySwitched(app) {
			// The Service is a blue/green's switch, and the canary was not decided now (its objects are left as they
			// are): the switch as the status last said, so a Service deleted meanwhile is there again.
			traffic = canary.Traffic{}
			if c := app.Status.Canary; c != nil && c.Weight >= 100 {
				traffic.Weight = 100
			}
		}
		return desired.Service(app, traffic), nil
	}, corev1ac.ExtractService).
		// Behind a Gateway, the canary's own Service, the route's second backend; a blue/green's preview without one.
		alsoAs("canary", desired.CanaryName, buildCanaryService),
	// With autoscaling, the HorizontalPodAutoscaler; without, it must not exist.
	declare("HorizontalPodAutoscaler", "autoscaling/v2", true, func(app *webappv2.WebApp, in inputs) (*autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration, error) {
		held, err := heldReplicas(app, in)
		if err != nil {
			// A blue/green's floor is not known: the HPA is left as it is (dropped, it would let both versions shrink).
			return nil, err
		}
		return desired.HPA(app, held)
	}, autoscalingv2ac.ExtractHorizontalPodAutoscaler),
	// With spec.expose.ingress, an Ingress; without, it must not exist.
	declare("Ingress", "networking.k8s.io/v1", true, func(app *webappv2.WebApp, _ inputs) (*networkingv1ac.IngressApplyConfiguration, error) {
		return desired.Ingress(app), nil
	}, networkingv1ac.ExtractIngress).
		// A blue/green's preview host behind an Ingress, to the canary's Service alone while it runs.
		alsoAs("preview", desired.CanaryName, buildPreviewIngress),
	// With spec.expose.gateway, an HTTPRoute; without, it must not exist. Only where the Gateway API is served
	// (servedAPIs): it is often installed after the operator, or not at all.
	declare("HTTPRoute", gatewayGroup+"/v1", true, func(app *webappv2.WebApp, in inputs) (*gwv1ac.HTTPRouteApplyConfiguration, error) {
		traffic, err := canaryTraffic(in)
		if err != nil {
			// The canary's share is not known: the route is left as it is.
			return nil, err
		}
		return desired.HTTPRoute(app, traffic), nil
	}, gwv1ac.ExtractHTTPRoute).whereServed().
		// A blue/green's preview host, to the canary's Service alone while it runs.
		alsoAs("preview", desired.CanaryName, buildPreviewRoute),
	// With a volume of kind claim, the PersistentVolumeClaim the WebApp owns. Without, it is released, never
	// deleted: a spec edit never takes data away. On the WebApp's deletion it is released too, unless its
	// deletionPolicy is Delete.
	declare("PersistentVolumeClaim", "v1", true, func(app *webappv2.WebApp, _ inputs) (*corev1ac.PersistentVolumeClaimApplyConfiguration, error) {
		return desired.Claim(app), nil
	}, corev1ac.ExtractPersistentVolumeClaim).keptOn(desired.ClaimKept),
	// With a canary strategy, the record of the stable version's pod template (stable_record.go), which the stable
	// Deployment holds while a canary runs or after a rollback; its data is immutable, so a new stable version
	// replaces it.
	declareNamed("ControllerRevision", "apps/v1", "ControllerRevision", true, stableRecordName, desiredStableRecord, extractStableRecord).
		replacedWhen(recordReplaced).
		// The operator's own bookkeeping: never released, it goes with the WebApp whatever the deletion policy.
		goesWithTheWebApp(),
	// At one replica there is nothing to protect: the PodDisruptionBudget must not exist.
	declare("PodDisruptionBudget", "policy/v1", true, func(app *webappv2.WebApp, _ inputs) (*policyv1ac.PodDisruptionBudgetApplyConfiguration, error) {
		return desired.PDB(app), nil
	}, policyv1ac.ExtractPodDisruptionBudget),
})

// childKind is one kind of child, or a variant of one (alsoAs): a second object of the kind per WebApp, under
// another name.
type childKind struct {
	kind, apiVersion string
	// id names the child in memory, in the outcomes and in the fingerprint: its kind, or kind/variant.
	id string
	// name is the child's name for a WebApp (nil: the WebApp's own).
	name func(*webappv2.WebApp) string
	// variants are the kind's other objects per WebApp (alsoAs), listed after it by expand.
	variants []childKind
	// variant declares a variant of the kind with the kind's types (see alsoAs).
	variant func(suffix string, name func(*webappv2.WebApp) string, build any) childKind
	// object is an empty object of the kind, as the cache keeps it.
	object func() client.Object
	// optional: the builder may return nil, meaning the child must not exist; one that does is deleted (with a UID
	// precondition, so only the one seen).
	optional bool
	// ifServed: the kind's API may not be served (a CRD installed after the operator, or never); the kind is
	// watched and written only once it is (servedAPIs).
	ifServed bool
	// keptOnDeletion, set for a kept kind (hooks.kept), says whether the WebApp's deletion releases its object too
	// (the WebApp then carries the finalizer).
	keptOnDeletion func(*webappv2.WebApp) bool
	// goesWith: an object of the kind is the operator's own record, never released by an Orphan deletion: garbage
	// collection deletes it with the WebApp.
	goesWith bool
	// configHash reads the config hash an object of the kind carries (nil: it carries none).
	configHash func(client.Object) string
	// hooks are shared by the declaration's copies (write reads them).
	hooks *hooks
	// build is the kind's builder (nil apply configuration: must not exist), for Plan.
	build func(app *webappv2.WebApp, in inputs) (runtime.ApplyConfiguration, error)
	// write and release are ensure and release for the kind's types.
	write   func(ctx context.Context, r *WebAppReconciler, app *webappv2.WebApp, in inputs, o ssa.Opts) (childOutcome, error)
	release func(ctx context.Context, r *WebAppReconciler, app *webappv2.WebApp) (bool, error)
}

// hooks are steps of a kind's write beyond the apply.
type hooks struct {
	// handover runs just before an apply to an existing object of the kind, with that object (nil: nothing to do):
	// it gives fields the apply is about to leave out to their next owner, and reports whether it wrote.
	handover func(ctx context.Context, r *WebAppReconciler, app *webappv2.WebApp, in inputs, cur client.Object) (bool, error)
	// kept: an object of the kind is never deleted; when the WebApp no longer wants it, it is released (our owner
	// reference taken off).
	kept bool
	// replaced reports whether the object cur cannot become desired by an apply (a field the API server never lets
	// change differs): it is then deleted, with a UID precondition, and the reconcile its deletion brings creates
	// it again. Where SSA cannot express a change at all, this is the narrowest write that can.
	replaced func(cur client.Object, desired any) bool
}

// inputs are what the builders need besides the WebApp, read once per reconcile.
type inputs struct {
	// desired.Inputs are what the builders of the desired state take: the config hash, whether the HPA exists and
	// whether the Deployment is missing.
	desired.Inputs
	configErr error // the config hash could not be computed
	hpaErr    error // whether the HPA exists could not be read
	// canary is the canary's decision (nil: no strategy).
	canary *canaryRun
	// claimErr: the claim of the WebApp's name cannot be the WebApp's (not its own, or of other access modes), or
	// could not be read (claimInTheWay); the Deployments that would mount it are held as they are.
	claimErr error
	// traffic is what the WebApp's Service and route, as our manager last applied them, send the canary's pods (read
	// while a canary Deployment of the WebApp's exists; trafficErr: they could not be read): while they send it
	// any (a write that took it off has not succeeded), the canary's objects are not deleted.
	traffic    appliedTraffic
	trafficErr error
}

// childOutcome is what writing one child found and did.
type childOutcome struct {
	ssa.Written
	obj, before client.Object // as it is now and as it was before any write; nil when missing or unreadable
	retained    []webappv2.RetainedField
}

// declare binds the kind's types to ensure and release: build returns the desired apply configuration (nil, for
// an optional kind: must not exist), extract reads what our manager owns on an object of the kind.
func declare[T any, PT ssa.Object[T], AC runtime.ApplyConfiguration](kind, apiVersion string, optional bool,
	build func(*webappv2.WebApp, inputs) (AC, error), extract func(PT, string) (AC, error)) childKind {
	return declareNamed(kind, apiVersion, kind, optional, nil, build, extract)
}

// declareNamed is declare for a child with id and name (nil: the WebApp's name).
func declareNamed[T any, PT ssa.Object[T], AC runtime.ApplyConfiguration](kind, apiVersion, id string, optional bool, name func(*webappv2.WebApp) string,
	build func(*webappv2.WebApp, inputs) (AC, error), extract func(PT, string) (AC, error)) childKind {
	c := childKind{kind: kind, apiVersion: apiVersion, id: id, name: name, optional: optional, object: func() client.Object { return PT(new(T)) }, hooks: &hooks{}}
	c.variant = func(suffix string, name func(*webappv2.WebApp) string, build any) childKind {
		b, ok := build.(func(*webappv2.WebApp, inputs) (AC, error))
		if !ok {
			panic(fmt.Sprintf("the %s variant of %s is built as %T, not as the kind's apply configuration", suffix, kind, build))
		}
		return declareNamed(kind, apiVersion, kind+"/"+suffix, true, name, b, extract)
	}
	c.build = func(app *webappv2.WebApp, in inputs) (runtime.ApplyConfiguration, error) {
		desired, err := build(app, in)
		if err != nil || reflect.ValueOf(desired).IsNil() {
			return nil, err
		}
		return desired, nil
	}
	c.write = func(ctx context.Context, r *WebAppReconciler, app *webappv2.WebApp, in inputs, o ssa.Opts) (childOutcome, error) {
		key := client.ObjectKeyFromObject(app)
		o.Name = c.objectName(app)
		if o.Name == app.Name {
			o.Name = ""
		}
		desired, err := build(app, in)
		if err != nil {
			// The child is left as it is, and only observed (from the cache): the status reports it rather than a
			// missing one.
			obj, _ := r.cachedChild(ctx, c, app)
			if held := (*heldError)(nil); errors.As(err, &held) {
				// Held because the claim it would mount cannot be the WebApp's: known, not unreadable.
				return childOutcome{obj: obj}, &heldError{kind: kind, key: o.ObjectKey(key), by: held.by}
			}
			if errors.Is(err, errTrafficOnCanary) {
				// A canary's object kept while the traffic is on it: known, not unreadable.
				return childOutcome{obj: obj}, fmt.Errorf("%s %s is kept as it is: %w", kind, o.ObjectKey(key), err)
			}
			return childOutcome{obj: obj}, &ssa.Error{Kind: kind, Key: o.ObjectKey(key), Err: err, Read: true}
		}
		if optional && reflect.ValueOf(desired).IsNil() && c.hooks.kept {
			released, err := releaseUnwanted(ctx, r, c, app)
			return childOutcome{Written: ssa.Written{Sent: released}}, err
		}
		if optional && reflect.ValueOf(desired).IsNil() {
			deleted, err := deleteChild(ctx, r, c, app)
			return childOutcome{Written: ssa.Written{Sent: deleted, Deleted: deleted}}, err
		}
		if c.hooks.replaced != nil {
			if cur, _ := r.cachedChild(ctx, c, app); cur != nil && c.hooks.replaced(cur, desired) {
				if in.traffic.onCanary() {
					// (The canary's Deployment, the one replaced kind:) its pods are never deleted under traffic, to be
					// replaced either; kept as they are until the write that takes it off them has succeeded.
					return childOutcome{obj: cur}, fmt.Errorf("%s %s is kept as it is: %w", kind, o.ObjectKey(key), errTrafficOnCanary)
				}
				// Replaced: deleted now, created by the next reconcile (brought by the deletion's event). Gone
				// already (the cache behind our own replacement): decided below, on the server's.
				deleted, err := deleteChild(ctx, r, c, app)
				if deleted || err != nil {
					return childOutcome{Written: ssa.Written{Sent: deleted, Deleted: deleted, Replaced: true}}, err
				}
			}
		}
		if h := c.hooks.handover; h != nil {
			o.BeforeApply = func(ctx context.Context, cur client.Object) (bool, error) { return h(ctx, r, app, in, cur) }
		}
		out, err := ssa.Ensure(ctx, r.writer(), id, key, func(PT) AC { return desired }, extract, o)
		res := childOutcome{Written: out.Written(), retained: out.Retained}
		if out.Obj != nil {
			res.obj = out.Obj
		}
		if out.Before != nil {
			res.before = out.Before
			res.ConfigChanged = c.configHash != nil && c.configHash(out.Before) != in.ConfigHash
		}
		return res, err
	}
	c.release = func(ctx context.Context, r *WebAppReconciler, app *webappv2.WebApp) (bool, error) {
		return ssa.Release(ctx, r.writer(), kind, app, c.objectName(app), extract)
	}
	return c
}

// alsoAs declares a variant of the kind: a second object of it per WebApp, named name(app), built by build (a
// func(*webappv2.WebApp, inputs) (AC, error) with the kind's apply configuration AC; nil: it must not exist, so a
// variant is always optional). It shares the kind's watch, cache and events, and has its own memory and
// fingerprint entry (id kind/suffix); it is written only where the kind is served, as the kind is (whereServed
// before alsoAs).
func (c childKind) alsoAs(suffix string, name func(*webappv2.WebApp) string, build any) childKind {
	v := c.variant(suffix, name, build)
	v.ifServed = c.ifServed
	c.variants = append(slices.Clip(c.variants), v)
	return c
}

// expand lists each declared kind followed by its variants.
func expand(kinds []childKind) []childKind {
	var out []childKind
	for _, c := range kinds {
		out = append(out, c)
		out = append(out, c.variants...)
	}
	return out
}

// objectName is the name of the WebApp's child c.
func (c childKind) objectName(app *webappv2.WebApp) string {
	if c.name != nil {
		return c.name(app)
	}
	return app.Name
}

// isVariant: c is a second object of its kind (alsoAs), not the kind's own.
func (c childKind) isVariant() bool { return c.id != c.kind }

func (c childKind) withConfigHash(f func(client.Object) string) childKind {
	c.configHash = f
	return c
}

// keptOn makes the kind kept: never deleted, released when unwanted, and on the WebApp's deletion where f says so.
func (c childKind) keptOn(f func(*webappv2.WebApp) bool) childKind {
	c.hooks.kept, c.keptOnDeletion = true, f
	return c
}

// variantReplacedWhen is replacedWhen for the variant declared last (alsoAs).
func (c childKind) variantReplacedWhen(f func(cur client.Object, desired any) bool) childKind {
	c.variants[len(c.variants)-1].hooks.replaced = f
	return c
}

// replacedWhen makes objects of the kind replaced (deleted, then created again) when f says an apply cannot change
// them into the desired one.
func (c childKind) replacedWhen(f func(cur client.Object, desired any) bool) childKind {
	c.hooks.replaced = f
	return c
}

// goesWithTheWebApp makes the kind deleted with the WebApp whatever its deletion policy (see goesWith).
func (c childKind) goesWithTheWebApp() childKind {
	c.goesWith = true
	return c
}

func (c childKind) whereServed() childKind {
	c.ifServed = true
	return c
}

func (c childKind) withHandover(f func(context.Context, *WebAppReconciler, *webappv2.WebApp, inputs, client.Object) (bool, error)) childKind {
	c.hooks.handover = f
	return c
}

// childOf is the declaration of the child of id (a kind, or kind/variant; nil for none).
func childOf(id string) *childKind {
	for i := range children {
		if children[i].id == id {
			return &children[i]
		}
	}
	return nil
}

// childKindOf is the declaration of kind (nil for a kind that is not a child).
func childKindOf(kind string) *childKind {
	for i := range children {
		if children[i].kind == kind {
			return &children[i]
		}
	}
	return nil
}

// cachedChild is app's child c as the cache has it, if app controls it (nil otherwise, with the error of a read
// that failed other than NotFound).
func (r *WebAppReconciler) cachedChild(ctx context.Context, c childKind, app *webappv2.WebApp) (client.Object, error) {
	obj := c.object()
	key := types.NamespacedName{Namespace: app.Namespace, Name: c.objectName(app)}
	if err := r.Client.Get(ctx, key, obj); err != nil || ssa.NotOursReason(obj, app) != "" {
		return nil, client.IgnoreNotFound(err)
	}
	return obj, nil
}

// releaseUnwanted releases app's child of the kept kind c that the WebApp no longer wants, if the WebApp still
// controls one (the cache says; nothing is read from the API server otherwise), and reports whether it sent.
func releaseUnwanted(ctx context.Context, r *WebAppReconciler, c childKind, app *webappv2.WebApp) (bool, error) {
	obj, err := r.cachedChild(ctx, c, app)
	if obj == nil {
		return false, err
	}
	sent, err := c.release(ctx, r, app)
	if sent && err == nil {
		ref := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: c.kind, APIVersion: c.apiVersion}, ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: c.objectName(app)}}
		r.event(app, ref, corev1.EventTypeNormal, "Released", "Release", "Released %s %s: the WebApp no longer uses it, and it is kept with its data", c.kind, c.objectName(app))
	}
	if err != nil {
		err = &ssa.Error{Kind: c.kind, Key: types.NamespacedName{Namespace: app.Namespace, Name: c.objectName(app)}, Err: err}
	}
	return sent, err
}

// deleteChild deletes app's child of kind c, if there is one and the WebApp controls it, and reports whether it
// sent the delete. Deleting is the one write that is not an apply: an object cannot be removed by applying less
// of it. The UID precondition makes sure it deletes the object seen, never one created since.
func deleteChild(ctx context.Context, r *WebAppReconciler, c childKind, app *webappv2.WebApp) (bool, error) {
	obj, err := r.cachedChild(ctx, c, app)
	if obj == nil {
		return false, err
	}
	uid := obj.GetUID()
	switch err := r.Client.Delete(ctx, obj, client.Preconditions{UID: &uid}); {
	case apierrors.IsNotFound(err):
		// Gone already: nothing was deleted, and there is nothing to tell.
		return false, nil
	case err != nil:
		return true, &ssa.Error{Kind: c.kind, Key: client.ObjectKeyFromObject(obj), Err: err}
	}
	return true, nil
}

// ChildObjects are empty objects of every child app may have, each named and placed as app's child of its kind
// (kind and apiVersion set): the declarations above, for kubectl-webapp to read them by.
func ChildObjects(app *webappv2.WebApp) []client.Object {
	out := make([]client.Object, 0, len(children))
	for _, c := range children {
		out = append(out, c.objectOf(app))
	}
	return out
}
