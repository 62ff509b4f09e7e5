package controller

import (
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv1ac "github.com/example/webapp-operator/applyconfig/apis/v1"
)

// Reasons of the Ready and Progressing conditions.
const (
	ReasonDeploymentReady          = "DeploymentReady"
	ReasonDeploymentProgressing    = "DeploymentProgressing"
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	ReasonDeploymentMissing        = "DeploymentMissing"
	ReasonRollingOut               = "RollingOut"
	ReasonRolloutComplete          = "RolloutComplete"
	ReasonApplyConflict            = "ApplyConflict"
	ReasonChildNotOwned            = "ChildNotOwned"
	ReasonInvalidChild             = "InvalidChild"
	ReasonApplyForbidden           = "ApplyForbidden"
	ReasonReconcileError           = "ReconcileError"
)

// desiredStatus is the complete status we mean to own for app, given the Deployment as last seen (nil when there
// is none) and the error of applying the children (nil when they were applied or already as desired). now is
// only used as the transition time of a condition whose status changes.
func desiredStatus(app *webappv1.WebApp, dep *appsv1.Deployment, applyErr error, now metav1.Time) *webappv1ac.WebAppApplyConfiguration {
	r := rolloutOf(app, dep)
	st := webappv1ac.WebAppStatus().
		WithObservedGeneration(app.Generation).
		WithSelector(labels.SelectorFromSet(selectorLabels(app)).String()).
		WithURL(serviceURL(app)).
		WithConditions(
			conditionApply(app, readyCondition(app, r, applyErr), now),
			conditionApply(app, progressingCondition(app, r), now),
		)
	// Zero counts are left out rather than sent as 0: the server drops zero-valued optional fields, so a 0 would
	// never compare equal to what we own and would cost a status write on every reconcile.
	if dep != nil && dep.Status.Replicas != 0 {
		st.WithReplicas(dep.Status.Replicas)
	}
	if dep != nil && dep.Status.AvailableReplicas != 0 {
		st.WithAvailableReplicas(dep.Status.AvailableReplicas)
	}
	return webappv1ac.WebApp(app.Name, app.Namespace).WithStatus(st)
}

// rollout is where the Deployment of app's current spec stands. Its message holds only values that change with
// the state (never a timestamp), so an unchanged state yields identical conditions and no write.
type rollout struct {
	done, stuck bool
	reason, msg string
}

func rolloutOf(app *webappv1.WebApp, dep *appsv1.Deployment) rollout {
	want := app.Spec.Replicas
	switch {
	case dep == nil:
		return rollout{reason: ReasonDeploymentMissing, msg: "Deployment has not been created yet"}
	case deploymentConditionReason(dep, appsv1.DeploymentProgressing) == "ProgressDeadlineExceeded":
		return rollout{stuck: true, reason: ReasonProgressDeadlineExceeded,
			msg: fmt.Sprintf("Deployment exceeded its progress deadline: %d/%d replicas updated, %d available", dep.Status.UpdatedReplicas, want, dep.Status.AvailableReplicas)}
	case dep.Status.ObservedGeneration < dep.Generation:
		return rollout{reason: ReasonDeploymentProgressing, msg: "Deployment controller has not observed the latest spec yet"}
	case dep.Spec.Replicas == nil || *dep.Spec.Replicas != want:
		return rollout{reason: ReasonDeploymentProgressing, msg: fmt.Sprintf("Deployment is not yet scaled to %d replicas", want)}
	case dep.Status.UpdatedReplicas != want || dep.Status.Replicas != want:
		return rollout{reason: ReasonDeploymentProgressing,
			msg: fmt.Sprintf("Deployment rollout in progress: %d/%d replicas updated, %d in total", dep.Status.UpdatedReplicas, want, dep.Status.Replicas)}
	case dep.Status.AvailableReplicas != want || dep.Status.ReadyReplicas != want:
		return rollout{reason: ReasonDeploymentProgressing, msg: fmt.Sprintf("Deployment has %d/%d replicas available", dep.Status.AvailableReplicas, want)}
	default:
		return rollout{done: true, reason: ReasonDeploymentReady, msg: fmt.Sprintf("Deployment has %d/%d replicas available", dep.Status.AvailableReplicas, want)}
	}
}

// readyCondition is True only when the Deployment of app's current spec is fully rolled out and the last apply
// succeeded; otherwise False with the reason.
func readyCondition(app *webappv1.WebApp, r rollout, applyErr error) metav1.Condition {
	c := metav1.Condition{Type: webappv1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: app.Generation, Reason: r.reason, Message: r.msg}
	switch {
	case applyErr != nil:
		c.Reason, c.Message = applyErrorReason(applyErr), truncate(applyErr.Error())
	case r.done:
		c.Status = metav1.ConditionTrue
	}
	return c
}

// progressingCondition is True while the rollout is under way, False once it completed or got stuck.
func progressingCondition(app *webappv1.WebApp, r rollout) metav1.Condition {
	c := metav1.Condition{Type: webappv1.ConditionProgressing, Status: metav1.ConditionTrue, ObservedGeneration: app.Generation, Reason: ReasonRollingOut, Message: r.msg}
	switch {
	case r.done:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonRolloutComplete
	case r.stuck:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonProgressDeadlineExceeded
	}
	return c
}

// maxMessage is the longest condition message the API accepts.
const maxMessage = 32768

func truncate(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	return msg[:maxMessage-3] + "..."
}

// applyErrorReason names the kind of failure of an apply, for the Ready condition's reason.
func applyErrorReason(err error) string {
	var ce *childError
	if errors.As(err, &ce) {
		err = ce.err
	}
	var notOurs *notOursError
	switch {
	case errors.As(err, &notOurs):
		return ReasonChildNotOwned
	case apierrors.IsConflict(err):
		return ReasonApplyConflict
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return ReasonInvalidChild
	case apierrors.IsForbidden(err):
		return ReasonApplyForbidden
	default:
		return ReasonReconcileError
	}
}

// deploymentConditionReason is the reason of dep's condition of type t, or "" when it has none.
func deploymentConditionReason(dep *appsv1.Deployment, t appsv1.DeploymentConditionType) string {
	for _, c := range dep.Status.Conditions {
		if c.Type == t && c.Status != corev1.ConditionUnknown {
			return c.Reason
		}
	}
	return ""
}

// conditionApply turns c into an apply configuration, keeping the transition time of app's existing condition of
// the same type when its status did not change, so an unchanged condition is byte-for-byte what we own already.
func conditionApply(app *webappv1.WebApp, c metav1.Condition, now metav1.Time) *metav1ac.ConditionApplyConfiguration {
	transition := now
	if old := meta.FindStatusCondition(app.Status.Conditions, c.Type); old != nil && old.Status == c.Status {
		transition = old.LastTransitionTime
	}
	return metav1ac.Condition().
		WithType(c.Type).
		WithStatus(c.Status).
		WithObservedGeneration(c.ObservedGeneration).
		WithReason(c.Reason).
		WithMessage(c.Message).
		WithLastTransitionTime(transition)
}
