// Package controller holds the WebApp reconciler: it keeps a Deployment and a Service in line with each WebApp
// by Server-Side Apply under one field manager, and reports the WebApp's status the same way.
package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv1ac "github.com/example/webapp-operator/applyconfig/apis/v1"
)

// DefaultRequeueAfter is how often a converged WebApp is looked at again; it costs no write when nothing drifted.
const DefaultRequeueAfter = 30 * time.Second

// WebAppReconciler reconciles WebApps.
type WebAppReconciler struct {
	Client client.Client
	// APIReader reads the ConfigMaps and Secrets a WebApp refers to, uncached (Client when nil).
	APIReader client.Reader
	// Recorder records events on WebApps (none when nil).
	Recorder events.EventRecorder
	// RequeueAfter is the period of the resync of a converged WebApp (DefaultRequeueAfter when zero).
	RequeueAfter time.Duration
	// MaxConcurrentReconciles is how many WebApps are reconciled at once (1 when zero).
	MaxConcurrentReconciles int
	// Now is the clock for condition transition times (metav1.Now when nil).
	Now func() metav1.Time

	configMu   sync.Mutex
	configMemo map[types.NamespacedName]configMemo // per WebApp: the config hash and what it was computed from
}

// +kubebuilder:rbac:groups=example.com,resources=webapps,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=example.com,resources=webapps/status,verbs=patch
// +kubebuilder:rbac:groups=example.com,resources=webapps/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile applies the WebApp's finalizer (Orphan policy only), its Deployment and Service, then its status.
func (r *WebAppReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	app := &webappv1.WebApp{}
	if err := r.Client.Get(ctx, req.NamespacedName, app); err != nil {
		// Deleted: garbage collection removes the children through their owner references.
		if apierrors.IsNotFound(err) {
			r.forgetConfig(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !app.DeletionTimestamp.IsZero() {
		// Being deleted: release the children if the policy says so, then let the WebApp go.
		return ctrl.Result{}, r.finalize(ctx, app)
	}
	// Only the Orphan policy needs a finalizer; Delete is left to garbage collection, so an uninstalled
	// operator never blocks deleting a WebApp.
	if err := r.applyFinalizer(ctx, app, app.Spec.DeletionPolicy == webappv1.DeletionPolicyOrphan); err != nil {
		return ctrl.Result{}, err
	}
	dep, applyErr := r.applyChildren(ctx, app, false)
	statusErr := r.applyStatus(ctx, app, dep, applyErr)
	return r.result(ctx, applyErr, statusErr)
}

// applyChildren applies the Deployment, the Service and the PodDisruptionBudget (each only if our owned fields
// drifted from desired; the PDB is deleted when one replica leaves nothing to protect) and returns the
// Deployment as it is now, for the status. With release, the children are applied without our owner reference
// (and only if they exist), which hands them over to nobody: they keep running.
func (r *WebAppReconciler) applyChildren(ctx context.Context, app *webappv1.WebApp, release bool) (*appsv1.Deployment, error) {
	key := types.NamespacedName{Namespace: app.Namespace, Name: app.Name}
	meta := metav1.ObjectMeta{Namespace: app.Namespace, Name: app.Name}
	// Releasing keeps the pod template as it is (no config read, no rollout during a deletion).
	hash, err := r.releaseOrConfigHash(ctx, app, release)
	if err != nil {
		return nil, err
	}
	desiredDep, err := desiredDeployment(app, hash)
	if err != nil {
		return nil, err
	}
	desiredSvc, desiredPdb := desiredService(app), desiredPDB(app)
	if release {
		desiredDep.OwnerReferences, desiredSvc.OwnerReferences = nil, nil
		if desiredPdb != nil {
			desiredPdb.OwnerReferences = nil
		}
	}
	dep, depErr := ensure(ctx, r.Client, r.reader(), key, child[appsv1.Deployment, *appsv1.Deployment, *appsv1ac.DeploymentApplyConfiguration]{
		kind: "Deployment", desired: desiredDep, extract: appsv1ac.ExtractDeployment, owner: app.UID, onlyIfExists: release,
	})
	// A new config hash on an existing Deployment is a config rollout, not drift.
	configChanged := dep.before != nil && dep.before.Spec.Template.Annotations[ConfigHashAnnotation] != hash
	r.record(ctx, app, "Deployment", &appsv1.Deployment{ObjectMeta: meta}, dep.existed, dep.sent, release, configChanged, depErr)
	svc, svcErr := ensure(ctx, r.Client, r.reader(), key, child[corev1.Service, *corev1.Service, *corev1ac.ServiceApplyConfiguration]{
		kind: "Service", desired: desiredSvc, extract: corev1ac.ExtractService, owner: app.UID, onlyIfExists: release,
	})
	r.record(ctx, app, "Service", &corev1.Service{ObjectMeta: meta}, svc.existed, svc.sent, release, false, svcErr)
	var pdbErr error
	if desiredPdb == nil {
		pdbErr = r.deletePDB(ctx, app, release)
	} else {
		pdb, err := ensure(ctx, r.Client, r.reader(), key, child[policyv1.PodDisruptionBudget, *policyv1.PodDisruptionBudget, *policyv1ac.PodDisruptionBudgetApplyConfiguration]{
			kind: "PodDisruptionBudget", desired: desiredPdb, extract: policyv1ac.ExtractPodDisruptionBudget, owner: app.UID, onlyIfExists: release,
		})
		r.record(ctx, app, "PodDisruptionBudget", &policyv1.PodDisruptionBudget{ObjectMeta: meta}, pdb.existed, pdb.sent, release, false, err)
		pdbErr = err
	}
	return dep.obj, errors.Join(depErr, svcErr, pdbErr)
}

// releaseOrConfigHash is the config hash of the Deployment as it stands when releasing, the current one otherwise.
func (r *WebAppReconciler) releaseOrConfigHash(ctx context.Context, app *webappv1.WebApp, release bool) (string, error) {
	if !release {
		return r.configHash(ctx, app)
	}
	dep := &appsv1.Deployment{}
	if err := r.reader().Get(ctx, types.NamespacedName{Namespace: app.Namespace, Name: app.Name}, dep); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	return dep.Spec.Template.Annotations[ConfigHashAnnotation], nil
}

// deletePDB deletes the WebApp's PodDisruptionBudget, if there is one and the WebApp controls it. Deleting is the
// one write that is not an apply: an object cannot be removed by applying less of it.
func (r *WebAppReconciler) deletePDB(ctx context.Context, app *webappv1.WebApp, release bool) error {
	pdb := &policyv1.PodDisruptionBudget{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: app.Namespace, Name: app.Name}, pdb)
	if err != nil || release || ours(pdb, app.UID) != "" {
		return client.IgnoreNotFound(err)
	}
	// The UID precondition makes sure we delete the PDB we saw, never one created since.
	err = r.Client.Delete(ctx, pdb, client.Preconditions{UID: &pdb.UID})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		appliesTotal.WithLabelValues("PodDisruptionBudget", resultFailed).Inc()
		r.event(app, pdb, corev1.EventTypeWarning, "DeleteFailed", "Delete", "Deleting PodDisruptionBudget %s failed: %v", app.Name, err)
		return &childError{kind: "PodDisruptionBudget", key: client.ObjectKeyFromObject(pdb), err: err}
	}
	appliesTotal.WithLabelValues("PodDisruptionBudget", resultDeleted).Inc()
	r.event(app, pdb, corev1.EventTypeNormal, "Deleted", "Delete", "Deleted PodDisruptionBudget %s: a single replica has nothing to protect", app.Name)
	return nil
}

// record counts an apply decision on child and tells the user about the ones worth a `kubectl describe` line.
// The event regards the WebApp and names the child as related object; repeated identical events are aggregated
// by the events API into one with a count.
func (r *WebAppReconciler) record(ctx context.Context, app *webappv1.WebApp, kind string, child client.Object, existed, sent, release, configChanged bool, err error) {
	name := kind + " " + app.Name
	switch {
	case err != nil:
		appliesTotal.WithLabelValues(kind, resultFailed).Inc()
		r.event(app, child, corev1.EventTypeWarning, "ApplyFailed", "Apply", "Applying %s failed: %v", name, err)
	case !sent:
		appliesTotal.WithLabelValues(kind, resultSkipped).Inc()
	case release:
		appliesTotal.WithLabelValues(kind, resultSent).Inc()
		r.event(app, child, corev1.EventTypeNormal, "Orphaned", "Release", "Released %s: it keeps running without an owner", name)
	case !existed:
		appliesTotal.WithLabelValues(kind, resultSent).Inc()
		r.event(app, child, corev1.EventTypeNormal, "Created", "Apply", "Created %s", name)
	case configChanged && app.Generation == app.Status.ObservedGeneration:
		// The spec did not change but the configuration it refers to did: the new hash rolls the pods.
		appliesTotal.WithLabelValues(kind, resultSent).Inc()
		r.event(app, child, corev1.EventTypeNormal, "ConfigChanged", "Apply", "Rolling %s: a ConfigMap or Secret it uses changed", name)
	case app.Generation == app.Status.ObservedGeneration:
		// The spec did not change since we last applied it, so something else changed our fields.
		appliesTotal.WithLabelValues(kind, resultSent).Inc()
		driftRepairsTotal.WithLabelValues(kind).Inc()
		r.event(app, child, corev1.EventTypeNormal, "DriftRepaired", "Apply", "Put back %s: fields owned by %s had been changed", name, FieldManager)
	default:
		appliesTotal.WithLabelValues(kind, resultSent).Inc()
		r.event(app, child, corev1.EventTypeNormal, "Updated", "Apply", "Applied generation %d of the spec to %s", app.Generation, name)
	}
	if sent {
		log.FromContext(ctx).V(1).Info("applied", "kind", kind, "created", !existed, "release", release, "error", err)
	}
}

func (r *WebAppReconciler) event(app *webappv1.WebApp, related client.Object, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(app, related, eventType, reason, action, note, args...)
	}
}

// applyFinalizer makes our field manager own exactly our finalizer when want is set, and nothing on the WebApp's
// main resource otherwise (which removes the finalizer, unless another manager also set it).
func (r *WebAppReconciler) applyFinalizer(ctx context.Context, app *webappv1.WebApp, want bool) error {
	build := func(app *webappv1.WebApp) *webappv1ac.WebAppApplyConfiguration {
		desired := webappv1ac.WebApp(app.Name, app.Namespace)
		if want {
			desired.WithFinalizers(webappv1.Finalizer)
		}
		return desired
	}
	err := r.applyToWebApp(ctx, app, "WebApp", build, webappv1ac.ExtractWebApp, func(desired *webappv1ac.WebAppApplyConfiguration) error {
		return r.Client.Apply(ctx, desired, client.FieldOwner(FieldManager), client.ForceOwnership)
	})
	if err != nil {
		return fmt.Errorf("applying the finalizer of WebApp %s: %w", app.Name, err)
	}
	return nil
}

// applyToWebApp sends build(app), an apply of the WebApp itself or of its status, with send, unless it equals
// what our manager owns there (extract); counted as kind. The cached WebApp can lag behind our own last write
// (a child's event may come first), so before sending, the decision is made again on the WebApp as the API
// server has it: a stale cache costs a read, never a write. A WebApp deleted meanwhile needs nothing any more.
func (r *WebAppReconciler) applyToWebApp(ctx context.Context, app *webappv1.WebApp, kind string,
	build func(*webappv1.WebApp) *webappv1ac.WebAppApplyConfiguration,
	extract func(*webappv1.WebApp, string) (*webappv1ac.WebAppApplyConfiguration, error),
	send func(*webappv1ac.WebAppApplyConfiguration) error) error {
	same, err := ownsStatusOrFinalizer(app, build, extract)
	if err == nil && !same {
		fresh := &webappv1.WebApp{}
		if err := r.reader().Get(ctx, client.ObjectKeyFromObject(app), fresh); err != nil {
			return client.IgnoreNotFound(err)
		}
		app = fresh
		same, err = ownsStatusOrFinalizer(app, build, extract)
	}
	switch {
	case err != nil:
		return err
	case same:
		appliesTotal.WithLabelValues(kind, resultSkipped).Inc()
		return nil
	}
	if err := send(build(app)); err != nil {
		appliesTotal.WithLabelValues(kind, resultFailed).Inc()
		return client.IgnoreNotFound(err)
	}
	appliesTotal.WithLabelValues(kind, resultSent).Inc()
	return nil
}

// ownsStatusOrFinalizer reports whether what our manager owns on app equals build(app).
func ownsStatusOrFinalizer(app *webappv1.WebApp, build func(*webappv1.WebApp) *webappv1ac.WebAppApplyConfiguration,
	extract func(*webappv1.WebApp, string) (*webappv1ac.WebAppApplyConfiguration, error)) (bool, error) {
	owned, err := extract(app, FieldManager)
	if err != nil {
		return false, err
	}
	return ownedFieldsMatch[webappv1.WebApp](build(app), owned)
}

// finalize runs when the WebApp is being deleted and still carries our finalizer: with the Orphan policy it first
// releases the children, then it removes the finalizer so the deletion completes.
func (r *WebAppReconciler) finalize(ctx context.Context, app *webappv1.WebApp) error {
	if !controllerutil.ContainsFinalizer(app, webappv1.Finalizer) {
		return nil
	}
	if app.Spec.DeletionPolicy == webappv1.DeletionPolicyOrphan {
		if _, err := r.applyChildren(ctx, app, true); err != nil {
			return err
		}
	}
	return r.applyFinalizer(ctx, app, false)
}

// applyStatus applies the status computed from the Deployment, unless it equals the status we already own.
func (r *WebAppReconciler) applyStatus(ctx context.Context, app *webappv1.WebApp, dep *appsv1.Deployment, applyErr error) error {
	now := r.now()
	build := func(app *webappv1.WebApp) *webappv1ac.WebAppApplyConfiguration {
		return desiredStatus(app, dep, applyErr, now)
	}
	return r.applyToWebApp(ctx, app, "WebAppStatus", build, webappv1ac.ExtractWebAppStatus, func(desired *webappv1ac.WebAppApplyConfiguration) error {
		return r.Client.Status().Apply(ctx, desired, client.FieldOwner(FieldManager), client.ForceOwnership)
	})
}

// result sorts the errors. Transient ones (the server unavailable, a conflict, a quota) are returned and retried
// with the controller's rate-limited backoff. A child the server refuses (invalid, or denied by an admission
// policy) or that is not ours cannot succeed by retrying soon: the error shows in Ready and the WebApp waits for
// the next resync (or a change to it or its children). Success waits for the next resync too.
func (r *WebAppReconciler) result(ctx context.Context, applyErr, statusErr error) (ctrl.Result, error) {
	err := errors.Join(applyErr, statusErr)
	if err == nil {
		return ctrl.Result{RequeueAfter: r.requeueAfter()}, nil
	}
	if statusErr == nil && onlyWaiting(applyErr) {
		log.FromContext(ctx).Error(err, "children refused; retrying at the next resync", "requeueAfter", r.requeueAfter().String())
		return ctrl.Result{RequeueAfter: r.requeueAfter()}, nil
	}
	return ctrl.Result{}, err
}

// onlyWaiting reports whether every error joined in err is a refusal that only a change can fix.
func onlyWaiting(err error) bool {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			if !onlyWaiting(e) {
				return false
			}
		}
		return true
	}
	var ce *childError
	var notOurs *notOursError
	return errors.As(err, &notOurs) || (errors.As(err, &ce) && ce.refused())
}

func (r *WebAppReconciler) now() metav1.Time {
	if r.Now != nil {
		return r.Now()
	}
	return metav1.Now()
}

func (r *WebAppReconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
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

// SetupWithManager watches WebApps and the Deployments, Services and PodDisruptionBudgets they control, so a
// change to any of them (an edit, a deletion, a rollout's progress) reconciles the owning WebApp within moments;
// and the metadata only of ConfigMaps and Secrets, so a change to one a WebApp refers to rolls its pods.
func (r *WebAppReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &webappv1.WebApp{}, configRefIndex, indexConfigRefs); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		// Our own status writes do not bring the WebApp back: they change neither its generation nor its metadata.
		For(&webappv1.WebApp{}, builder.WithPredicates(predicate.Or[client.Object](
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{},
			predicate.AnnotationChangedPredicate{}, metadataChanged))).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.webAppsReferring("configmap")), builder.OnlyMetadata).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.webAppsReferring("secret")), builder.OnlyMetadata).
		Named("webapp").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)}).
		Complete(r)
}
