// Package controller holds the WebApp reconciler: it keeps a Deployment, a Service and a PodDisruptionBudget in
// line with each WebApp by Server-Side Apply under one field manager, and reports its status the same way.
package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	webappv2ac "github.com/example/webapp-operator/applyconfig/apis/v2"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/pods"
	"github.com/example/webapp-operator/controller/ssa"
	"github.com/example/webapp-operator/controller/status"
)

// DefaultRequeueAfter is how often a converged WebApp is looked at again; it costs no write when nothing drifted.
const DefaultRequeueAfter = 30 * time.Second

// WebAppReconciler reconciles WebApps.
type WebAppReconciler struct {
	Client client.Client
	// APIReader reads from the API server, uncached: the ConfigMaps and Secrets a WebApp refers to, and whatever
	// the cache cannot be trusted with (Client when nil).
	APIReader client.Reader
	// Recorder records events on WebApps (none when nil).
	Recorder events.EventRecorder
	// RequeueAfter is the period of the resync (DefaultRequeueAfter when zero).
	RequeueAfter time.Duration
	// MaxConcurrentReconciles is how many WebApps are reconciled at once (1 when zero).
	MaxConcurrentReconciles int
	// Namespaces are the only namespaces watched (all when empty), as in CacheOptions.
	Namespaces []string
	// Now is the clock for condition transition times (metav1.Now when nil).
	Now func() metav1.Time

	// CheckTransport carries a canary's check queries to Prometheus (http.DefaultTransport when nil).
	CheckTransport http.RoundTripper

	// ProgressInterval is how long a change of a WebApp's progress alone waits after its last status write
	// (DefaultProgressInterval when zero; negative: never).
	ProgressInterval time.Duration

	mem    memory      // what is remembered of each WebApp between reconciles
	stores cacheStores // the cache's stores, read in place by the resync (none: the client)
	// podWatch watches the WebApps' pods while a rollout needs it (nil without a cache: then they are listed).
	podWatch *podWatch
	// apis says which kinds of child are served (nil: all, as in unit tests).
	apis *servedAPIs
	// checks says when each canary's checks are due.
	checks checkRounds
}

// +kubebuilder:rbac:groups=example.com,resources=webapps,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=example.com,resources=webapps/status,verbs=patch
// +kubebuilder:rbac:groups=example.com,resources=webapps/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments/scale,verbs=patch
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=list;watch
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=list
// +kubebuilder:rbac:groups="",resources=resourcequotas;namespaces,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile applies the WebApp's finalizer (Orphan policy only), its Deployment, Service and PodDisruptionBudget,
// then its status.
func (r *WebAppReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	app := &webappv2.WebApp{}
	if err := r.Client.Get(ctx, req.NamespacedName, app); err != nil {
		// Deleted: garbage collection removes the children through their owner references.
		if apierrors.IsNotFound(err) {
			r.mem.forget(req.NamespacedName)
			r.checks.forget(req.NamespacedName)
			r.watchPods(ctx, req.NamespacedName, false)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !app.DeletionTimestamp.IsZero() {
		// Being deleted: release the children if the policy says so, then let the WebApp go (a canary's objects first
		// wait for the gateway to follow the route: come back then). Done, it waits for other finalizers with nothing
		// left for a resync to do.
		wait, err := r.finalize(ctx, app)
		r.mem.settle(req.NamespacedName, r.fingerprint(ctx, app), err)
		return ctrl.Result{RequeueAfter: wait}, err
	}
	// Only the Orphan policy and a kept claim need a finalizer; Delete is left to garbage collection, so an
	// uninstalled operator never blocks deleting a WebApp that keeps nothing.
	if err := r.ensureFinalizer(ctx, app, needsFinalizer(app)); err != nil {
		r.mem.settle(req.NamespacedName, r.fingerprint(ctx, app), err)
		return ctrl.Result{}, err
	}
	// Nothing changed since a reconcile that found everything as desired: it would decide the same again.
	fp := r.fingerprint(ctx, app)
	if r.mem.matches(req.NamespacedName, fp) {
		return ctrl.Result{}, nil
	}
	return r.converge(ctx, app, fp)
}

// converge writes app's children, then its status, and remembers how that ended: converged at fp (nothing sent,
// nothing failed), failing, or neither, for the resync.
func (r *WebAppReconciler) converge(ctx context.Context, app *webappv2.WebApp, fp string) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(app)
	r.reportConversionDropped(app)
	// The kinds served now, for the writes and the status alike: a kind that comes or goes meanwhile brings
	// every WebApp back.
	active := r.activeChildren()
	// Observe: everything the decisions take, read once, first.
	o := r.observe(ctx, app)
	// Decide: the canary's next state (the builders take the rest from o as they build).
	o.canary.decide(o.now)
	r.tellCanary(app, o.canary)
	// Write: each child where what our manager owns differs from what was decided.
	kids, applyErr := r.applyChildren(ctx, app, active, o.inputs)
	if errors.Is(applyErr, ssa.ErrOwnerGoing) {
		// The cache is behind a deletion: the WebApp's own event brings the reconcile that handles it.
		r.mem.settle(key, "", nil)
		return ctrl.Result{}, nil
	}
	obs := kids.observation()
	obs.RouteServed = slices.ContainsFunc(active, func(c childKind) bool { return c.kind == "HTTPRoute" }) && !slices.Contains(kids.gone, "HTTPRoute")
	podsWait := r.podsAfterWrites(ctx, app, o, &obs)
	held, statusWrote, statusErr := r.applyStatus(ctx, app, obs, applyErr)
	res, err := ctrl.Result{}, r.result(ctx, applyErr, statusErr)
	if held > 0 && err == nil {
		// A progress update waits: come back when it may be written.
		res.RequeueAfter = held
	}
	if c := kids.canary; c != nil && c.err == nil && c.decision.After > 0 && err == nil && (res.RequeueAfter == 0 || c.decision.After < res.RequeueAfter) {
		// A canary's pause ends, or its checks are due: nothing else would bring it back then.
		res.RequeueAfter = c.decision.After
	}
	if podsWait > 0 && err == nil && (res.RequeueAfter == 0 || podsWait < res.RequeueAfter) {
		// The pods are being listed, or one started recently and runs unready (the kubelet's events of its probes
		// change no object): look again soon.
		res.RequeueAfter = podsWait
	}
	switch {
	case err != nil:
		// Failing: remembered with what it read after its own writes, so the resync leaves it to the backoff until
		// something else changes.
		fp = r.fingerprint(ctx, app)
	case applyErr != nil || statusErr != nil || held > 0 || podsWait > 0 || kids.wrote || statusWrote || kids.canary.running():
		// Not converged, and not failing either: the next resync looks again.
		fp = ""
	}
	r.mem.settle(key, fp, err)
	return res, err
}

// reportConversionDropped tells, by a warning event, what the write through v1 that made this generation carried
// for v2-only fields and v2 refused (status.conversionDropped, written by the conversion). Once per generation:
// while no status has observed it (after a restart, one that has), and once in this process's memory. (An event
// note holds at most 1,024 bytes.)
func (r *WebAppReconciler) reportConversionDropped(app *webappv2.WebApp) {
	d := app.Status.ConversionDropped
	if d == nil || d.Generation != app.Generation || app.Status.ObservedGeneration >= app.Generation ||
		!r.mem.firstDropReport(client.ObjectKeyFromObject(app), app.UID, app.Generation) {
		return
	}
	r.event(app, nil, corev1.EventTypeWarning, "ConversionDataDropped", "Convert",
		"A write through v1 carried %s that v2 refuses; left out: %s", strings.Join(d.Fields, ", "), pods.TruncateTo(d.Message, 800))
}

// childrenOutcome is what writing a WebApp's children found and did, by kind.
type childrenOutcome struct {
	byKind   map[string]childOutcome
	errs     map[string]error
	retained []webappv2.RetainedField
	wrote    bool     // a write was sent
	gone     []string // kinds whose API went away during the writes (servedAPIs.recheck)
	// desired.ReplicasByHPA: the Deployment's count was left to the HorizontalPodAutoscaler (it exists).
	replicasByHPA bool
	// canary is the canary's decision (nil: no strategy).
	canary *canaryRun
}

// observation is what the status may say of the Deployment, and the fields other managers keep.
func (c childrenOutcome) observation() status.Observation {
	out, err := c.byKind["Deployment"], c.errs["Deployment"]
	obs := observeDeployment(out, err)
	obs.Retained = c.retained
	obs.ReplicasByHPA = c.replicasByHPA
	// The exposing children, for the Exposed condition.
	obs.Ingress, _ = c.byKind["Ingress"].obj.(*networkingv1.Ingress)
	obs.Route, _ = c.byKind["HTTPRoute"].obj.(*gwv1.HTTPRoute)
	obs.PreviewRoute, _ = c.byKind["HTTPRoute/preview"].obj.(*gwv1.HTTPRoute)
	obs.ExposeErr = errors.Join(c.errs["Ingress"], c.errs["HTTPRoute"])
	if !status.IsNotOurs(c.errs["PersistentVolumeClaim"]) {
		// Only the WebApp's own claim is reported on (status.mountTrouble).
		obs.Claim, _ = c.byKind["PersistentVolumeClaim"].obj.(*corev1.PersistentVolumeClaim)
	}
	obs.Canary = c.canary.observed()
	return obs
}

// applyChildren writes each active kind of child of app as built from in (only where what we own differs from
// desired; an optional child the WebApp no longer needs is deleted) and returns what it found and did.
func (r *WebAppReconciler) applyChildren(ctx context.Context, app *webappv2.WebApp, active []childKind, in inputs) (childrenOutcome, error) {
	// A WebApp whose status says a child is not ours reads a missing child before trying to create it, so after a
	// restart it sends nothing the server would refuse.
	opts := ssa.Opts{Owner: app, ReadFirst: status.ReadyReason(app) == webappv2.ReasonChildNotOwned}
	res := childrenOutcome{byKind: map[string]childOutcome{}, errs: map[string]error{}, replicasByHPA: desired.ReplicasByHPA(app, in.HPAExists), canary: in.canary}
	var created []childKind
	var errs []error
	for _, c := range active {
		out, err := c.write(ctx, r, app, in, opts)
		if err != nil && r.apis.recheck(ctx, c, err) {
			// The kind's API went away (its CRD deleted): a state the status tells, not a failure of this WebApp's,
			// with no event and no retry.
			res.gone = append(res.gone, c.kind)
			continue
		}
		if r.record(ctx, app, c, out.Written, err) {
			created = append(created, c)
		}
		res.byKind[c.id], res.errs[c.id] = out, err
		res.wrote = res.wrote || out.Sent
		errs = append(errs, err)
	}
	if len(created) > 0 {
		// One event names every child this reconcile created: a new WebApp costs one event, not one per child.
		names := make([]string, len(created))
		for i, c := range created {
			names[i] = c.kind + " " + c.objectName(app)
		}
		r.event(app, childRef(app, created[0]), corev1.EventTypeNormal, "Created", "Apply", "Created %s", strings.Join(names, ", "))
	}
	res.retained = r.retained(ctx, app, res.byKind, active)
	return res, errors.Join(errs...)
}

// retained is the list for status.retainedFields: what this reconcile's applies let go of and other managers keep
// (by kind), and what the status listed before, or earlier applies found and no status stored yet, that the child,
// read from the API server, still has.
func (r *WebAppReconciler) retained(ctx context.Context, app *webappv2.WebApp, byKind map[string]childOutcome, active []childKind) []webappv2.RetainedField {
	key := client.ObjectKeyFromObject(app)
	listed := app.Status.RetainedFields
	if r.mem.Behind("WebAppStatus", key, app) {
		// The cache has not yet seen our last status write: the list is the one written, so none is lost.
		if written, ok := r.mem.lastRetained(key, app.UID); ok {
			listed = written
		} else if live := (&webappv2.WebApp{}); r.reader().Get(ctx, key, live) == nil {
			listed = live.Status.RetainedFields
		}
	}
	listed = append(slices.Clone(listed), r.mem.retainedPending(key, app.UID)...)
	// A variant's fields are not listed: it is the operator's alone, for the length of a canary, and the list names
	// children by kind, each with the WebApp's name.
	active = slices.DeleteFunc(slices.Clone(active), childKind.isVariant)
	for _, c := range active {
		r.mem.retainedFound(key, app.UID, byKind[c.kind].retained)
	}
	var out []webappv2.RetainedField
	for _, c := range active {
		kind := c.kind
		out = append(out, byKind[kind].retained...)
		if !slices.ContainsFunc(listed, func(f webappv2.RetainedField) bool { return f.Kind == kind }) {
			continue
		}
		obj := c.object()
		if err := r.reader().Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			// Unknown: still listed, rather than claimed applied.
			obj = nil
		}
		for _, f := range listed {
			if f.Kind != kind || slices.ContainsFunc(out, func(o webappv2.RetainedField) bool { return o.Kind == kind && o.Field == f.Field }) {
				continue
			}
			if obj == nil {
				out = append(out, f)
			} else {
				out = append(out, ssa.StillRetained(kind, []webappv2.RetainedField{f}, obj)...)
			}
		}
	}
	if len(out) > ssa.MaxRetained {
		out = out[:ssa.MaxRetained]
	}
	return out
}

// record tells the user, by an event on the WebApp that names the child as related object, about the writes worth
// a `kubectl describe` line, and counts them. An apply that changed nothing on the server is no news. It reports a
// creation rather than telling it: one event names all the children a reconcile created.
func (r *WebAppReconciler) record(ctx context.Context, app *webappv2.WebApp, c childKind, w ssa.Written, err error) (created bool) {
	kind := c.kind
	name, child := kind+" "+c.objectName(app), childRef(app, c)
	switch {
	case w.Deleted && err != nil:
		ssa.AppliesTotal.WithLabelValues(kind, ssa.ResultFailed).Inc()
		r.event(app, child, corev1.EventTypeWarning, "DeleteFailed", "Delete", "Deleting %s failed: %v", name, err)
	case w.Deleted && w.Replaced:
		// Replaced (an immutable field changed): created again at once, no news for the user.
		ssa.AppliesTotal.WithLabelValues(kind, ssa.ResultDeleted).Inc()
	case w.Deleted:
		ssa.AppliesTotal.WithLabelValues(kind, ssa.ResultDeleted).Inc()
		r.event(app, child, corev1.EventTypeNormal, "Deleted", "Delete", "Deleted %s: the WebApp's spec no longer asks for it", name)
	case err != nil && w.Sent:
		r.event(app, child, corev1.EventTypeWarning, "ApplyFailed", "Apply", "Applying %s failed: %v", name, err)
	case err != nil, !w.Sent, !w.Changed:
		// A failed read, a refusal not sent again, or an apply that changed nothing: no news.
	case !w.Existed:
		created = true
	case w.HandedOver:
		// The count passed to the HPA that now exists: no drift, and the status says who sets the count. (Not
		// "Updated" either: the cached status may not show yet the generation the previous reconcile applied.)
	case w.ConfigChanged && app.Generation == app.Status.ObservedGeneration:
		// The spec did not change but the configuration it refers to did: the new hash rolls the pods.
		r.event(app, child, corev1.EventTypeNormal, "ConfigChanged", "Apply", "Rolling %s: a ConfigMap or Secret it uses changed", name)
	case app.Generation == app.Status.ObservedGeneration:
		// The spec did not change since we last applied it, so something else changed our fields.
		driftRepairsTotal.WithLabelValues(kind).Inc()
		r.event(app, child, corev1.EventTypeNormal, "DriftRepaired", "Apply", "Put back %s: fields owned by %s had been changed", name, webappv2.FieldManager)
	default:
		r.event(app, child, corev1.EventTypeNormal, "Updated", "Apply", "Applied generation %d of the spec to %s", app.Generation, name)
	}
	if w.Sent {
		log.FromContext(ctx).V(1).Info("applied", "kind", kind, "created", !w.Existed, "changed", w.Changed, "deleted", w.Deleted, "error", err)
	}
	return created
}

// childRef names app's child c, as the related object of an event.
func childRef(app *webappv2.WebApp, c childKind) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: c.kind, APIVersion: c.apiVersion},
		ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: c.objectName(app)}}
}

func (r *WebAppReconciler) event(app *webappv2.WebApp, related runtime.Object, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(app, related, eventType, reason, action, note, args...)
	}
}

// ensureFinalizer makes our field manager own exactly our finalizer when want is set, and nothing on the WebApp's
// main resource otherwise. A finalizer we do not want that another manager also set (a restored manifest that
// carried it) survives that apply; it is then removed with a guarded JSON patch, since nothing else will.
func (r *WebAppReconciler) ensureFinalizer(ctx context.Context, app *webappv2.WebApp, want bool) error {
	key := client.ObjectKeyFromObject(app)
	out, err := ssa.Ensure(ctx, r.writer(), "WebApp", key, func(*webappv2.WebApp) *webappv2ac.WebAppApplyConfiguration {
		desired := webappv2ac.WebApp(app.Name, app.Namespace)
		if want {
			desired.WithFinalizers(webappv2.Finalizer)
		}
		return desired
	}, webappv2ac.ExtractWebApp, ssa.Opts{OnlyIfExists: true})
	if err == nil && !want && out.Obj != nil && controllerutil.ContainsFinalizer(out.Obj, webappv2.Finalizer) {
		err = r.removeFinalizer(ctx, key)
	}
	if err = client.IgnoreNotFound(err); err != nil {
		return fmt.Errorf("writing the finalizer of WebApp %s: %w", app.Name, err)
	}
	return nil
}

// removeFinalizer removes our finalizer, which another manager also owns, from the WebApp as the server has it.
func (r *WebAppReconciler) removeFinalizer(ctx context.Context, key types.NamespacedName) error {
	fresh := &webappv2.WebApp{}
	if err := r.reader().Get(ctx, key, fresh); err != nil {
		return err
	}
	i := slices.Index(fresh.Finalizers, webappv2.Finalizer)
	if i < 0 {
		return nil
	}
	if err := ssa.RemoveGuarded(ctx, r.Client, fresh, "/metadata/finalizers", fresh.Finalizers, i); err != nil {
		ssa.AppliesTotal.WithLabelValues("WebApp", ssa.ResultFailed).Inc()
		return err
	}
	ssa.AppliesTotal.WithLabelValues("WebApp", ssa.ResultPatched).Inc()
	log.FromContext(ctx).Info("removed our finalizer, which another field manager had also set")
	return nil
}

// finalize runs when the WebApp is being deleted and still carries our finalizer: with the Orphan policy it first
// retires a canary (traffic back to the stable version, then the canary's objects deleted: it returns how long to
// wait meanwhile), then it releases the children the deletion keeps (all others with the Orphan policy, a kept
// claim), then it removes the finalizer so the deletion completes.
func (r *WebAppReconciler) finalize(ctx context.Context, app *webappv2.WebApp) (time.Duration, error) {
	if !controllerutil.ContainsFinalizer(app, webappv2.Finalizer) {
		return 0, nil
	}
	if app.Spec.DeletionPolicy == webappv2.DeletionPolicyOrphan {
		// An untried version is never left running unowned, nor traffic sent to one about to go (orphan_canary.go).
		if wait, err := r.retireCanary(ctx, app); err != nil || wait > 0 {
			return wait, err
		}
	}
	if err := r.releaseChildren(ctx, app); err != nil {
		return 0, err
	}
	return 0, r.ensureFinalizer(ctx, app, false)
}

// needsFinalizer: the WebApp's deletion must release children first (the Orphan policy, or a kind kept on
// deletion, such as a claim with deletionPolicy Retain), which garbage collection cannot do.
func needsFinalizer(app *webappv2.WebApp) bool {
	return app.Spec.DeletionPolicy == webappv2.DeletionPolicyOrphan || slices.ContainsFunc(children, func(c childKind) bool {
		return c.keptOnDeletion != nil && c.keptOnDeletion(app)
	})
}

// releasedOnDeletion: the WebApp's deletion releases its child of kind c (all of them with the Orphan policy, but
// a variant: a canary's objects are the operator's alone, deleted by retireCanary, or by the garbage collector).
func releasedOnDeletion(app *webappv2.WebApp, c childKind) bool {
	if c.isVariant() || c.goesWith {
		// The canary's objects (retired first, see retireCanary) and the operator's own records go with the WebApp.
		return false
	}
	return app.Spec.DeletionPolicy == webappv2.DeletionPolicyOrphan || (c.keptOnDeletion != nil && c.keptOnDeletion(app))
}

// releaseChildren takes our owner reference off the children the deletion keeps, changing nothing else: they
// keep running (or, a claim, keep their data).
func (r *WebAppReconciler) releaseChildren(ctx context.Context, app *webappv2.WebApp) error {
	key := client.ObjectKeyFromObject(app)
	var errs []error
	for _, c := range r.activeChildren() {
		if !releasedOnDeletion(app, c) {
			continue
		}
		sent, err := c.release(ctx, r, app)
		switch {
		case err != nil:
			ssa.AppliesTotal.WithLabelValues(c.kind, ssa.ResultFailed).Inc()
			r.event(app, childRef(app, c), corev1.EventTypeWarning, "ReleaseFailed", "Release", "Releasing %s %s failed: %v", c.kind, c.objectName(app), err)
			errs = append(errs, &ssa.Error{Kind: c.kind, Key: types.NamespacedName{Namespace: key.Namespace, Name: c.objectName(app)}, Err: err})
		case sent:
			ssa.AppliesTotal.WithLabelValues(c.kind, ssa.ResultSent).Inc()
			if app.Spec.DeletionPolicy == webappv2.DeletionPolicyOrphan {
				r.event(app, childRef(app, c), corev1.EventTypeNormal, "Orphaned", "Release", "Released %s %s: it keeps running without an owner", c.kind, c.objectName(app))
			} else {
				// A kind kept on deletion (the owned claim): kept for its data, not to keep running.
				r.event(app, childRef(app, c), corev1.EventTypeNormal, "Released", "Release", "Released %s %s: the WebApp is deleted, and it is kept with its data", c.kind, c.objectName(app))
			}
		}
	}
	return errors.Join(errs...)
}

// applyStatus applies the status of app's snapshot, unless it equals the status we already own, and reports
// whether it wrote. A change of progress alone (counts, messages) within ProgressInterval of the last status write
// is held back: it returns how long, and the status is not written now (the condition statuses, reasons,
// observedGeneration and retained fields are never held).
func (r *WebAppReconciler) applyStatus(ctx context.Context, app *webappv2.WebApp, obs status.Observation, applyErr error) (time.Duration, bool, error) {
	// A canary's new state is written at once: its children were written by it, and the next reconcile decides from
	// the status.
	canaryChanged := canaryStateChanged(obs.Canary, app.Status.Canary)
	if obs.PodsPending && !canaryChanged {
		// The pods it is computed from are being listed: it waits for them rather than be written twice.
		return pods.Recheck, false, nil
	}
	now := r.now()
	key := client.ObjectKeyFromObject(app)
	// The shape of the status (what is never held back) does not depend on the current transition times.
	if held := r.mem.statusWait(key, app.UID, status.Desired(app, app, obs, applyErr, now), r.progressInterval(), now.Time); held > 0 && !canaryChanged {
		return held, false, nil
	}
	var sent *webappv2ac.WebAppApplyConfiguration
	out, err := ssa.Ensure(ctx, r.writer(), "WebAppStatus", key, func(cur *webappv2.WebApp) *webappv2ac.WebAppApplyConfiguration {
		sent = status.Desired(app, cur, obs, applyErr, now)
		return sent
	}, webappv2ac.ExtractWebAppStatus, ssa.Opts{OnlyIfExists: true, Status: true})
	if out.Sent && err == nil {
		r.mem.statusWritten(key, app.UID, sent, now.Time)
	}
	if err == nil {
		// The status stored lists the retained fields found so far.
		r.mem.retainedStored(key)
	}
	// A WebApp deleted meanwhile needs no status.
	return 0, out.Sent, client.IgnoreNotFound(err)
}

// result sorts the errors. Transient ones (the server unavailable, a conflict, a quota) are returned and retried
// with the controller's rate-limited backoff. A child the server refuses (invalid, or denied by an admission
// policy) or that is not ours cannot succeed by retrying soon: the error shows in Ready and the WebApp waits for
// the next resync (or a change to it or its children). Success waits for the next resync too: the resync loop
// enqueues every WebApp whose last reconcile sent something or failed.
func (r *WebAppReconciler) result(ctx context.Context, applyErr, statusErr error) error {
	err := errors.Join(applyErr, statusErr)
	if err == nil {
		return nil
	}
	if statusErr == nil && onlyWaiting(applyErr) {
		// Logged quietly: Ready and an event already say it, and it repeats at every resync until something changes.
		log.FromContext(ctx).V(1).Info("children refused; retrying at the next resync", "error", err.Error(), "resyncPeriod", r.requeueAfter().String())
		return nil
	}
	return err
}

// onlyWaiting reports whether every error joined in err is a refusal that only a change can fix.
func onlyWaiting(err error) bool {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		waiting := false
		for _, e := range joined.Unwrap() {
			if errors.Is(e, errTrafficOnCanary) {
				// A canary kept under traffic waits for the write that takes it off: as the other errors do.
				continue
			}
			if !onlyWaiting(e) {
				return false
			}
			waiting = true
		}
		return waiting
	}
	var ce *ssa.Error
	return errors.As(err, &ce) && ce.Waiting()
}

func (r *WebAppReconciler) now() metav1.Time {
	if r.Now != nil {
		return r.Now()
	}
	return metav1.Now()
}

func (r *WebAppReconciler) progressInterval() time.Duration {
	if r.ProgressInterval != 0 {
		return r.ProgressInterval
	}
	return DefaultProgressInterval
}

// writer is the one write, with the reconciler's clients and memory.
func (r *WebAppReconciler) writer() *ssa.Writer {
	return &ssa.Writer{Client: r.Client, Reader: r.reader(), Mem: &r.mem, Types: childTypes}
}

func (r *WebAppReconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// watchPods says whether key's WebApp needs its pods watched (no-op without a pod watch).
func (r *WebAppReconciler) watchPods(ctx context.Context, key client.ObjectKey, needed bool) {
	if r.podWatch != nil {
		r.podWatch.set(ctx, key, needed)
	}
}

func (r *WebAppReconciler) requeueAfter() time.Duration {
	if r.RequeueAfter > 0 {
		return r.RequeueAfter
	}
	return DefaultRequeueAfter
}

// metadataChanged passes a WebApp update that set its deletion timestamp or changed its finalizers.
var metadataChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero() ||
		!slices.Equal(e.ObjectOld.GetFinalizers(), e.ObjectNew.GetFinalizers())
}}

// enqueueOwningWebApp maps a child's event to the WebApp that controls it, by its controller's owner reference, as
// the builder's Owns would, without Owns's REST mapping of the owner for every event (to learn the scope of a kind
// known to be namespaced): at 10,000 WebApps rolling out, that mapping made 14% of the manager's allocations.
var enqueueOwningWebApp = handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
	if key, ok := owningWebApp(o); ok {
		return []reconcile.Request{{NamespacedName: key}}
	}
	return nil
})

// owningWebApp is the key of the WebApp whose owner reference controls o (any version of the API), if one does.
func owningWebApp(o metav1.Object) (types.NamespacedName, bool) {
	ref := pods.ControllerOfKind(o, webappv2.GroupVersion.Group, "WebApp")
	if ref == nil {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}, true
}

// SetupWithManager watches WebApps and the Deployments, Services and PodDisruptionBudgets they control, so a
// change to any of them (an edit, a deletion, a rollout's progress) reconciles the owning WebApp within moments;
// the metadata only of ConfigMaps and Secrets, so a change to one a WebApp refers to rolls its pods; and the
// metadata only of ResourceQuotas and Namespaces, so a change that may fix a denied write retries it at once.
func (r *WebAppReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &webappv2.WebApp{}, configRefIndex, indexConfigRefs); err != nil {
		return err
	}
	// What the reconciler reads from the cache has the owner's key back in our managedFields entries (controller/ssa/ownerkey.go).
	if _, wrapped := r.Client.(ssa.OwnerKeyClient); !wrapped {
		r.Client = ssa.OwnerKeyClient{Client: r.Client}
	}
	r.podWatch = newPodWatch(ctx, mgr.GetCache(), podWatchLinger)
	stores, err := storesOf(ctx, mgr.GetCache())
	if err != nil {
		return err
	}
	r.stores = stores
	if len(stores) < len(fingerprintKinds()) {
		log.FromContext(ctx).Info("the resync reads some kinds through the client: the cache keeps no single store of them", "stores", slices.Sorted(maps.Keys(stores)))
	}
	// A round of a canary's checks that ended has its WebApp reconciled (checkRounds).
	checksEnded := make(chan event.GenericEvent, 1024)
	r.checks.wake = func(key types.NamespacedName) {
		select {
		case checksEnded <- event.GenericEvent{Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
		default:
			// Full: the WebApp's requeue after the check interval takes the results.
		}
	}
	resync := make(chan event.GenericEvent)
	if err := mgr.Add(r.resyncLoop(resync)); err != nil {
		return err
	}
	// Kinds whose API may be missing (HTTPRoute): those served now are watched from the start; the others from
	// when they are served, found by servedAPIs, which then has the WebApps looked at again at once.
	disc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	var ctl controller.Controller
	r.apis = &servedAPIs{disc: disc, served: map[string]bool{}, kick: make(chan struct{}, 1)}
	// What is served at the start is watched by the controller's own Owns below.
	r.apis.check(ctx)
	r.apis.onServed = func(ctx context.Context, c childKind) error {
		// The informer first: a reconcile that counts the kind served reads it from the cache.
		if _, err := mgr.GetCache().GetInformer(ctx, c.object(), cache.BlockUntilSynced(false)); err != nil {
			return err
		}
		return ctl.Watch(source.Kind(mgr.GetCache(), c.object(), enqueueOwningWebApp))
	}
	// A kind no longer served: its informer (and the controller's handler on it) goes, so no reflector lists a
	// missing resource again and again.
	r.apis.onGone = func(ctx context.Context, c childKind) error {
		return mgr.GetCache().RemoveInformer(ctx, c.object())
	}
	// Either way, every WebApp whose fingerprint changed (every one: the kinds are part of it) is looked at again.
	r.apis.changed = func(ctx context.Context) { go r.resyncOnce(ctx, resync) }
	b := ctrl.NewControllerManagedBy(mgr)
	for _, c := range r.activeChildren() {
		// Any change to a child (an edit, a deletion, a rollout's progress) reconciles its WebApp at once. (A
		// variant is of a kind already watched.)
		if !c.isVariant() {
			b = b.Watches(c.object(), enqueueOwningWebApp)
		}
	}
	b = b.
		// Our own status writes do not bring the WebApp back: they change neither its generation nor its metadata.
		For(&webappv2.WebApp{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{},
			predicate.AnnotationChangedPredicate{}, metadataChanged))).
		// A pod's trouble (a pull failure, a crash loop, no node, a failing probe) is reported within seconds, not
		// at the deadline: the pods of WebApps whose rollout is not complete are watched (podWatch).
		WatchesRawSource(source.Channel(r.podWatch.events, &handler.EnqueueRequestForObject{})).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.webAppsReferring("configmap")), builder.OnlyMetadata).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.webAppsReferring("secret")), builder.OnlyMetadata).
		// A quota change may fix a denied write: the failing WebApps there are retried at once.
		Watches(&corev1.ResourceQuota{}, handler.EnqueueRequestsFromMapFunc(r.failingWebAppsIn), builder.OnlyMetadata).
		// The periodic resync: WebApps a reconcile could decide differently for, from resyncLoop.
		WatchesRawSource(source.Channel(resync, &handler.EnqueueRequestForObject{})).
		WatchesRawSource(source.Channel(checksEnded, &handler.EnqueueRequestForObject{})).
		Named("webapp")
	// WebApps whose status does not describe their spec yet go first (queue.go).
	b = b.WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1), NewQueue: newQueue(mgr.GetLogger(), r.unobserved)})
	if len(r.Namespaces) == 0 {
		// A relabelled namespace may be what fixes a denied write (a webhook may select namespaces by label). A
		// namespaced install cannot read Namespaces (cluster-scoped): its WebApps retry on their backoff instead.
		b = b.Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.failingWebAppsIn), builder.OnlyMetadata)
	}
	ctl, err = b.Build(r)
	if err != nil {
		return err
	}
	return mgr.Add(r.apis)
}

// activeChildren are the kinds of child the API server serves (all but a kind declared whereServed whose API is
// not installed).
func (r *WebAppReconciler) activeChildren() []childKind {
	out := make([]childKind, 0, len(children))
	for _, c := range children {
		if r.apis.isServed(c) {
			out = append(out, c)
		}
	}
	return out
}

// observeDeployment turns the outcome of the Deployment's write into what the status may say of it. A Deployment
// that is not ours is never reported on; one that could not be read is unknown, not missing.
func observeDeployment(out childOutcome, err error) status.Observation {
	var ce *ssa.Error
	var held *heldError
	dep, _ := out.obj.(*appsv1.Deployment)
	switch {
	case errors.As(err, &held):
		// Ours, held as it is (a claim it would mount is not the WebApp's): its state is known, not this generation's.
		return status.Observation{Dep: dep, Known: true, Err: err}
	case errors.As(err, &ce) && ce.NotOursReason != "":
		return status.Observation{}
	case dep != nil:
		return status.Observation{Dep: dep, Known: true, Err: err}
	case errors.As(err, &ce) && ce.Read:
		// Nothing could be read, or the Deployment cannot be built and is not in the cache as ours.
		return status.Observation{Err: err}
	default:
		// Missing is known when the server answered (a refused create included); a failed read tells nothing.
		return status.Observation{Known: err == nil || out.Sent || (errors.As(err, &ce) && ce.Waiting()), Err: err}
	}
}
