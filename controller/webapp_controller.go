// Package controller holds the WebApp reconciler: it keeps a Deployment and a Service in line with each WebApp
// by Server-Side Apply under one field manager, and reports the WebApp's status the same way.
package controller

import (
	"context"
	"errors"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv1ac "github.com/example/webapp-operator/applyconfig/apis/v1"
)

// DefaultRequeueAfter is how often a converged WebApp is looked at again; it costs no write when nothing drifted.
const DefaultRequeueAfter = 30 * time.Second

// WebAppReconciler reconciles WebApps.
type WebAppReconciler struct {
	Client client.Client
	// RequeueAfter is the period of the resync of a converged WebApp (DefaultRequeueAfter when zero).
	RequeueAfter time.Duration
	// MaxConcurrentReconciles is how many WebApps are reconciled at once (1 when zero).
	MaxConcurrentReconciles int
	// Now is the clock for condition transition times (metav1.Now when nil).
	Now func() metav1.Time
}

// +kubebuilder:rbac:groups=example.com,resources=webapps,verbs=get;list;watch
// +kubebuilder:rbac:groups=example.com,resources=webapps/status,verbs=patch
// +kubebuilder:rbac:groups=example.com,resources=webapps/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch

// Reconcile applies the WebApp's Deployment and Service, then its status.
func (r *WebAppReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	app := &webappv1.WebApp{}
	if err := r.Client.Get(ctx, req.NamespacedName, app); err != nil {
		// Deleted: garbage collection removes the children through their owner references.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !app.DeletionTimestamp.IsZero() {
		// Being deleted: nothing to keep in line any more, and a status write would only race the deletion.
		return ctrl.Result{}, nil
	}

	dep, applyErr := r.applyChildren(ctx, app)
	statusErr := r.applyStatus(ctx, app, dep, applyErr)
	return r.result(applyErr, statusErr)
}

// applyChildren applies the Deployment and the Service (each only if our owned fields drifted from desired) and
// returns the Deployment as it is now, for the status.
func (r *WebAppReconciler) applyChildren(ctx context.Context, app *webappv1.WebApp) (*appsv1.Deployment, error) {
	key := types.NamespacedName{Namespace: app.Namespace, Name: app.Name}
	dep, depSent, depErr := ensure(ctx, r.Client, key, child[appsv1.Deployment, *appsv1.Deployment, *appsv1ac.DeploymentApplyConfiguration]{
		kind: "Deployment", desired: desiredDeployment(app), extract: appsv1ac.ExtractDeployment,
	})
	_, svcSent, svcErr := ensure(ctx, r.Client, key, child[corev1.Service, *corev1.Service, *corev1ac.ServiceApplyConfiguration]{
		kind: "Service", desired: desiredService(app), extract: corev1ac.ExtractService,
	})
	if depSent || svcSent {
		log.FromContext(ctx).V(1).Info("applied children", "deployment", depSent, "service", svcSent)
	}
	return dep, errors.Join(depErr, svcErr)
}

// applyStatus applies the status computed from the Deployment, unless it equals the status we already own.
func (r *WebAppReconciler) applyStatus(ctx context.Context, app *webappv1.WebApp, dep *appsv1.Deployment, applyErr error) error {
	desired := desiredStatus(app, dep, applyErr, r.now())
	owned, err := webappv1ac.ExtractWebAppStatus(app, FieldManager)
	if err != nil {
		return err
	}
	if same, err := ownedFieldsMatch[webappv1.WebApp](desired, owned); err != nil || same {
		return err
	}
	err = r.Client.Status().Apply(ctx, desired, client.FieldOwner(FieldManager), client.ForceOwnership)
	// A WebApp deleted since we read it has no status left to write.
	return client.IgnoreNotFound(err)
}

// result sorts the errors: a child the server can never accept is terminal (no retry until the WebApp changes);
// anything else is retried with the controller's rate-limited backoff; success waits for the next resync.
func (r *WebAppReconciler) result(applyErr, statusErr error) (ctrl.Result, error) {
	if err := errors.Join(applyErr, statusErr); err != nil {
		var ce *childError
		if statusErr == nil && errors.As(applyErr, &ce) && ce.terminal() {
			return ctrl.Result{}, reconcile.TerminalError(err)
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.requeueAfter()}, nil
}

func (r *WebAppReconciler) now() metav1.Time {
	if r.Now != nil {
		return r.Now()
	}
	return metav1.Now()
}

func (r *WebAppReconciler) requeueAfter() time.Duration {
	if r.RequeueAfter > 0 {
		return r.RequeueAfter
	}
	return DefaultRequeueAfter
}

// SetupWithManager watches WebApps and the Deployments and Services they control, so a change to any of them
// (an edit, a deletion, a rollout's progress) reconciles the owning WebApp within moments.
func (r *WebAppReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&webappv1.WebApp{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Named("webapp").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)}).
		Complete(r)
}
