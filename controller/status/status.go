// Package status is the WebApp's status as a pure projection of what a reconcile observed (Observation: the
// Deployment as the write left it, the pods and what they say, the exposing children, the claim, the canary's
// decision) and of its writes' failures: the Ready, Progressing and Exposed conditions with their reasons and
// messages, the counts, who sets the count, the retained fields and the canary's state. It does no I/O (the lint
// config refuses a client, cache, HTTP or file import here); the reconciler observes, then applies what Desired
// builds, under the same field manager as the children.
package status

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	webappv2ac "github.com/example/webapp-operator/applyconfig/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/pods"
)

// Observation is the Deployment as the status may report it, and the fields of children other managers keep.
type Observation struct {
	Dep   *appsv1.Deployment // ours, as it is now; nil when it does not exist
	Known bool               // false when it could not be read or is not ours: then nothing is claimed from it
	// err is the failure to write this generation's Deployment: then its rollout is not this generation's.
	Err error
	// desired.ReplicasByHPA: the count was left to the HorizontalPodAutoscaler, which exists; otherwise it is the WebApp's.
	ReplicasByHPA bool
	// retained are fields the WebApp no longer sets that other field managers keep on its children.
	Retained []webappv2.RetainedField
	// pods are the WebApp's pods, as the cache keeps them (nil when they could not be read or are not watched).
	Pods []*pods.Pod
	// probes are the failed probes' words of the pods that run unready.
	Probes pods.ProbeFailures
	// podsPending: the status is computed from the pods (the rollout is not complete) and the pod watch is still
	// listing them; then it is not written (see applyStatus).
	PodsPending bool
	// routeServed: the cluster serves HTTPRoute; ingress and route are the exposing children as observed.
	RouteServed bool
	Ingress     *networkingv1.Ingress
	Route       *gwv1.HTTPRoute
	// PreviewRoute is a blue/green's preview route as observed (nil when there is none, or it is unknown).
	PreviewRoute *gwv1.HTTPRoute
	ExposeErr    error // the failure to write this spec's Ingress or HTTPRoute
	// claim is the PersistentVolumeClaim the WebApp owns, as observed (nil: none, or not known); missing are the
	// ConfigMaps and Secrets its volumes mount that do not exist (see mountTrouble).
	Claim   *corev1.PersistentVolumeClaim
	Missing []string
	// canary is the canary's decision (nil: no strategy).
	Canary *Canary
}

// Canary is a canary strategy's part in the status: the step machine's decision and the plan it followed,
// or decided false when this reconcile could not decide it (its inputs unknown: the state is kept as it is).
type Canary struct {
	Decided  bool
	Decision canary.Decision
	Plan     canary.Plan
}

// Running says a canary is under way (tried, promoting, or its pods still there after a rollback).
func (c *Canary) Running() bool {
	return c != nil && c.Decided && (c.Decision.Phase == canary.PhaseCanary || c.Decision.Phase == canary.PhasePromoting || c.Decision.ReplicaWeight > 0 ||
		c.Decision.State.Retiring != "")
}

// Desired is the complete status we mean to own for app (the snapshot whose spec the children were built
// from, so observedGeneration never claims a spec they did not get), given the WebApp as it is now (cur: its
// conditions' transition times are kept while their status holds, its counts while the Deployment is unknown), the
// Deployment as observed and the error of writing the children. now is only the transition time of a condition
// whose status changes.
func Desired(app, cur *webappv2.WebApp, obs Observation, applyErr error, now metav1.Time) *webappv2ac.WebAppApplyConfiguration {
	if cur == nil {
		cur = app
	}
	r := rolloutOf(app, obs, applyErr)
	st := webappv2ac.WebAppStatus().
		WithObservedGeneration(app.Generation).
		WithSelector(labels.SelectorFromSet(desired.SelectorLabels(app)).String()).
		WithConditions(
			conditionApply(cur, readyCondition(app, r, applyErr), now),
			conditionApply(cur, progressingCondition(app, r), now),
		)
	// Where the app is: its first exposed URL, or the Service inside the cluster.
	if urls := desired.ExposedURLs(app); len(urls) > 0 {
		st.WithURL(urls[0]).WithURLs(urls...).
			WithConditions(conditionApply(cur, exposedCondition(app, obs.RouteServed, obs.Ingress, obs.Route, obs.ExposeErr), now))
	} else {
		st.WithURL(desired.ServiceURL(app))
	}
	replicas, available := int32(0), int32(0)
	switch {
	case obs.Dep != nil:
		replicas, available = obs.Dep.Status.Replicas, obs.Dep.Status.AvailableReplicas
	case !obs.Known && !IsNotOurs(applyErr):
		// Unreadable: keep the last observation rather than report zero pods that may be running.
		replicas, available = cur.Status.Replicas, cur.Status.AvailableReplicas
	}
	// Zero counts are left out rather than sent as 0: the server drops zero-valued optional fields, so a 0 would
	// never compare equal to what we own and would cost a status write on every reconcile.
	if replicas != 0 {
		st.WithReplicas(replicas)
	}
	if available != 0 {
		st.WithAvailableReplicas(available)
	}
	// Who decides the count, and what it is now: the HPA once it exists (its decision is the Deployment's count: it
	// writes it there), the WebApp until then and without autoscaling.
	if obs.ReplicasByHPA {
		st.WithReplicasSetBy(webappv2.ReplicasSetByHPA)
	} else {
		st.WithReplicasSetBy(webappv2.ReplicasSetByWebApp)
	}
	if n := DesiredReplicas(app, obs); n != 0 {
		st.WithDesiredReplicas(n)
	}
	for _, f := range obs.Retained {
		st.WithRetainedFields(webappv2ac.RetainedField().WithKind(f.Kind).WithField(f.Field).WithManagers(f.Managers...))
	}
	switch c := obs.Canary; {
	case c != nil && c.Decided:
		st.WithCanary(CanaryStatus(c.Decision, c.Plan))
	case c != nil && cur.Status.Canary != nil:
		// Not decided this time: the rollout's state is kept as it is, never lost.
		st.WithCanary(keptCanaryStatus(cur.Status.Canary))
	}
	return webappv2ac.WebApp(app.Name, app.Namespace).WithStatus(st)
}

// DesiredReplicas is the number of pods app asks for now: the WebApp's count (desired.WebAppReplicas), or once the HPA
// decides it, the Deployment's count (the HPA's decision; 0 while there is no Deployment to read it from).
func DesiredReplicas(app *webappv2.WebApp, obs Observation) int32 {
	if !obs.ReplicasByHPA {
		return desired.WebAppReplicas(app)
	}
	if obs.Dep != nil && obs.Dep.Spec.Replicas != nil {
		// The HPA's count, within the WebApp's bounds: the HPA brings a count outside them (bounds changed since it
		// last scaled) inside at its next sync, metrics or not, and the rollout is not this generation's until then.
		n := *obs.Dep.Spec.Replicas
		if a := app.Spec.Autoscaling; a != nil {
			n = min(max(n, ptr.Deref(a.MinReplicas, 1)), a.MaxReplicas)
		}
		return n
	}
	return 0
}

// RolledOut says the Deployment has its count of updated, available pods.
func RolledOut(dep *appsv1.Deployment, want int32) bool {
	return dep.Spec.Replicas != nil && *dep.Spec.Replicas == want && dep.Status.UpdatedReplicas == want && dep.Status.Replicas == want &&
		dep.Status.AvailableReplicas == want && dep.Status.ReadyReplicas == want
}

// writeError is how a write's failure says what it was: another's object in the way, or an object or an input of it
// that could not be read. The reconciler's write errors (ssa.Error) are; any other error is the write's own failure.
type writeError interface {
	error
	NotOurs() bool
	ReadFailed() bool
}

// isReadError: something err's write needed could not be read, so the state is unknown.
func isReadError(err error) bool {
	var we writeError
	return errors.As(err, &we) && we.ReadFailed()
}

// IsNotOurs says err's write found another's object in the way.
func IsNotOurs(err error) bool {
	var we writeError
	return errors.As(err, &we) && we.NotOurs()
}

// rollout is where the Deployment of app's current spec stands. Its message holds only values that change with
// the state (never a timestamp), so an unchanged state yields identical conditions and no write.
type rollout struct {
	done, stuck, unknown bool
	notApplied           bool   // this generation's Deployment apply failed: nothing is claimed of its rollout
	stopped              bool   // a canary was rolled back: nothing progresses until the spec changes
	progressReason       string // Progressing's reason when it is not RollingOut
	retained             []webappv2.RetainedField
	reason, msg          string
}

func rolloutOf(app *webappv2.WebApp, obs Observation, applyErr error) rollout {
	want, dep := DesiredReplicas(app, obs), obs.Dep
	troubleReason, trouble := pods.Trouble(obs.Pods, obs.Probes)
	mount := mountTrouble(app, obs.Missing, obs.Claim, troubleReason, trouble)
	switch {
	case !obs.Known || isReadError(obs.Err):
		return rollout{unknown: true, reason: ApplyErrorReason(applyErr), msg: "The Deployment's state is not known: " + errorMessage(applyErr)}
	case obs.Err != nil:
		// The Deployment still has an older spec: its rollout, even a complete one, is not this generation's.
		return rollout{notApplied: true, reason: ApplyErrorReason(obs.Err),
			msg: fmt.Sprintf("Generation %d of the spec was not applied to the Deployment: %s", app.Generation, errorMessage(obs.Err))}
	case dep == nil:
		return rollout{reason: webappv2.ReasonDeploymentMissing, msg: "Deployment has not been created yet"}
	case dep.Status.ObservedGeneration < dep.Generation:
		// Checked first: until the Deployment controller has seen the latest spec, its conditions are about an
		// older one (a ProgressDeadlineExceeded a spec change has just fixed, say).
		return rollout{reason: webappv2.ReasonDeploymentProgressing, msg: "Deployment controller has not observed the latest spec yet"}
	case deploymentConditionReason(dep, appsv1.DeploymentProgressing) == webappv2.ReasonProgressDeadlineExceeded:
		msg := fmt.Sprintf("Deployment exceeded its progress deadline: %d/%d replicas updated, %d available", dep.Status.UpdatedReplicas, want, dep.Status.AvailableReplicas)
		if trouble != "" {
			msg += "; " + trouble
		}
		return rollout{stuck: true, reason: webappv2.ReasonProgressDeadlineExceeded, msg: msg}
	case mount != "" && !RolledOut(dep, want):
		// A volume the pods cannot mount is said by name, before what the pods show of it (no node, or nothing).
		return rollout{reason: webappv2.ReasonMountFailing, msg: mount}
	case troubleReason != "" && !RolledOut(dep, want):
		// What the pods say is wrong, within seconds of it, rather than a count until the deadline.
		return rollout{reason: troubleReason, msg: trouble}
	case obs.ReplicasByHPA && dep.Spec.Replicas != nil && *dep.Spec.Replicas != want:
		// Bounds changed since the HPA last scaled: its next sync brings the count inside them.
		return rollout{reason: webappv2.ReasonDeploymentProgressing, msg: fmt.Sprintf("The HorizontalPodAutoscaler has not yet brought the Deployment's %d replicas within spec.autoscaling's bounds (to %d)", *dep.Spec.Replicas, want)}
	case dep.Spec.Replicas == nil || *dep.Spec.Replicas != want:
		return rollout{reason: webappv2.ReasonDeploymentProgressing, msg: fmt.Sprintf("Deployment is not yet scaled to %d replicas", want)}
	case dep.Status.UpdatedReplicas != want || dep.Status.Replicas != want:
		return rollout{reason: webappv2.ReasonDeploymentProgressing,
			msg: fmt.Sprintf("Deployment rollout in progress: %d/%d replicas updated, %d in total", dep.Status.UpdatedReplicas, want, dep.Status.Replicas)}
	case dep.Status.AvailableReplicas != want || dep.Status.ReadyReplicas != want:
		return rollout{reason: webappv2.ReasonDeploymentProgressing, msg: fmt.Sprintf("Deployment has %d/%d replicas available", dep.Status.AvailableReplicas, want)}
	case obs.Canary != nil && obs.Canary.Decided && obs.Canary.Decision.Phase != canary.PhaseStable:
		// The stable version serves, rolled out: the canary says the rest.
		r := canaryRollout(obs.Canary)
		if v := previewVerdict(app, obs.PreviewRoute); v != "" && obs.Canary.Decision.Phase != canary.PhaseRolledBack {
			r.msg += "; " + v
		}
		return r
	default:
		return rollout{done: true, reason: webappv2.ReasonDeploymentReady, msg: fmt.Sprintf("Deployment has %d/%d replicas available", dep.Status.AvailableReplicas, want),
			retained: obs.Retained}
	}
}

// canaryRollout is where a canary stands, once the stable version is rolled out: a canary under way progresses, a
// rolled-back one is stopped until the spec changes (Ready is False either way: the spec is not what serves).
func canaryRollout(c *Canary) rollout {
	if c.Decision.Phase == canary.PhaseRolledBack {
		return rollout{stopped: true, reason: webappv2.ReasonRolledBack, msg: canaryMessage(c.Decision, c.Plan)}
	}
	return rollout{reason: webappv2.ReasonCanary, progressReason: webappv2.ReasonCanary, msg: canaryMessage(c.Decision, c.Plan)}
}

func errorMessage(err error) string {
	if err == nil {
		return "no error"
	}
	return truncate(err.Error())
}

// readyCondition is True only when the Deployment of app's current spec is fully rolled out and the last write
// succeeded; Unknown when something could not be read; otherwise False with the reason.
func readyCondition(app *webappv2.WebApp, r rollout, applyErr error) metav1.Condition {
	c := metav1.Condition{Type: webappv2.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: app.Generation, Reason: r.reason, Message: truncate(r.msg)}
	switch {
	case applyErr != nil:
		c.Reason, c.Message = ApplyErrorReason(applyErr), truncate(applyErr.Error())
		if r.unknown && !IsNotOurs(applyErr) || isReadError(applyErr) {
			// Nothing was found wrong; what is there could not be read.
			c.Status = metav1.ConditionUnknown
		}
	case r.done && len(r.retained) > 0:
		// Rolled out, but with fields of an older spec that another manager keeps: not fully applied.
		c.Reason, c.Message = webappv2.ReasonFieldsRetained, retainedMessage(app, r.retained)
	case r.done:
		c.Status = metav1.ConditionTrue
	}
	return c
}

// progressingCondition is True while the rollout is under way, False once it completed or got stuck, Unknown when
// the Deployment's state is not known (unreadable, or not ours).
func progressingCondition(app *webappv2.WebApp, r rollout) metav1.Condition {
	c := metav1.Condition{Type: webappv2.ConditionProgressing, Status: metav1.ConditionTrue, ObservedGeneration: app.Generation, Reason: webappv2.ReasonRollingOut, Message: truncate(r.msg)}
	switch {
	case r.done:
		c.Status, c.Reason = metav1.ConditionFalse, webappv2.ReasonRolloutComplete
	case r.stuck:
		c.Status, c.Reason = metav1.ConditionFalse, webappv2.ReasonProgressDeadlineExceeded
	case r.notApplied, r.stopped:
		c.Status, c.Reason = metav1.ConditionFalse, r.reason
	case r.progressReason != "":
		c.Reason = r.progressReason
	case r.unknown:
		c.Status, c.Reason = metav1.ConditionUnknown, r.reason
	}
	return c
}

// maxMessage is the longest condition message the API accepts.
const maxMessage = 32768

func truncate(msg string) string { return pods.TruncateTo(msg, maxMessage) }

// ApplyErrorReason names the kind of failure of a write, for the conditions' reason.
func ApplyErrorReason(err error) string {
	switch {
	case IsNotOurs(err):
		return webappv2.ReasonChildNotOwned
	case apierrors.IsConflict(err):
		return webappv2.ReasonApplyConflict
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return webappv2.ReasonInvalidChild
	case apierrors.IsForbidden(err):
		return webappv2.ReasonApplyForbidden
	default:
		return webappv2.ReasonReconcileError
	}
}

// ReadyReason is the reason of app's stored Ready condition, or "".
func ReadyReason(app *webappv2.WebApp) string {
	if c := meta.FindStatusCondition(app.Status.Conditions, webappv2.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
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

// conditionApply turns c into an apply configuration, keeping the transition time of cur's existing condition of
// the same type when its status did not change, so an unchanged condition is byte-for-byte what we own already.
func conditionApply(cur *webappv2.WebApp, c metav1.Condition, now metav1.Time) *metav1ac.ConditionApplyConfiguration {
	transition := now
	if old := meta.FindStatusCondition(cur.Status.Conditions, c.Type); old != nil && old.Status == c.Status {
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

// exposedCondition (for a WebApp with spec.expose) says whether app is reachable from outside as spec.expose asks: for an Ingress, once its
// controller has published an address; for an HTTPRoute, the Gateway's verdict in the route's status (Accepted and
// ResolvedRefs of the parent that is ours to name). served says whether the cluster serves HTTPRoute; ing and
// route are the children as observed (nil when missing or unknown); err is the failure to write this spec's one
// (then what the old one says is not this spec's).
func exposedCondition(app *webappv2.WebApp, served bool, ing *networkingv1.Ingress, route *gwv1.HTTPRoute, err error) metav1.Condition {
	c := metav1.Condition{Type: webappv2.ConditionExposed, Status: metav1.ConditionFalse, ObservedGeneration: app.Generation}
	e := app.Spec.Expose
	switch {
	case err != nil && (e.Ingress != nil || served):
		c.Reason, c.Message = ApplyErrorReason(err), "this spec's route was not applied: "+truncate(err.Error())
	case e.Ingress != nil && ing == nil:
		c.Reason, c.Message = webappv2.ReasonWaitingForAddress, "the Ingress has not been created yet"
	case e.Ingress != nil:
		var addrs []string
		for _, lb := range ing.Status.LoadBalancer.Ingress {
			if a := lb.IP + lb.Hostname; a != "" {
				addrs = append(addrs, a)
			}
		}
		if len(addrs) == 0 {
			c.Reason, c.Message = webappv2.ReasonWaitingForAddress, fmt.Sprintf("the Ingress controller of class %q has not published an address for the Ingress yet", e.Ingress.ClassName)
			break
		}
		slices.Sort(addrs)
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, webappv2.ReasonExposed, fmt.Sprintf("the Ingress controller of class %q serves it at %s", e.Ingress.ClassName, strings.Join(addrs, ", "))
	case !served:
		c.Reason, c.Message = webappv2.ReasonGatewayAPIMissing, "spec.expose.gateway needs an HTTPRoute, and this cluster does not serve gateway.networking.k8s.io/v1 HTTPRoute: install the Gateway API CRDs and an implementation"
	case route == nil:
		c.Reason, c.Message = webappv2.ReasonWaitingForGateway, "the HTTPRoute has not been created yet"
	default:
		c.Status, c.Reason, c.Message = gatewayVerdict(app, route)
	}
	return c
}

// gatewayVerdict reads the route's status for the Gateway spec.expose names: Accepted and ResolvedRefs, both
// True, mean the Gateway routes the app's hosts to it.
func gatewayVerdict(app *webappv2.WebApp, route *gwv1.HTTPRoute) (metav1.ConditionStatus, string, string) {
	gw := app.Spec.Expose.Gateway
	ns := gw.Namespace
	if ns == "" {
		ns = app.Namespace
	}
	name := ns + "/" + gw.Name
	for _, p := range route.Status.Parents {
		// The parent as we name it: a Gateway (the defaults), in its namespace, at our listener (or none).
		ref := p.ParentRef
		pns := app.Namespace
		if ref.Namespace != nil {
			pns = string(*ref.Namespace)
		}
		if string(ref.Name) != gw.Name || pns != ns || ref.Group != nil && *ref.Group != gwv1.GroupName || ref.Kind != nil && *ref.Kind != "Gateway" ||
			string(ptr.Deref(ref.SectionName, "")) != gw.SectionName {
			continue
		}
		// Only the conditions of the route's current generation count.
		accepted := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted))
		resolved := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionResolvedRefs))
		switch {
		case accepted == nil || accepted.ObservedGeneration < route.Generation || resolved != nil && resolved.ObservedGeneration < route.Generation:
			return metav1.ConditionFalse, webappv2.ReasonWaitingForGateway, fmt.Sprintf("Gateway %s has not judged the HTTPRoute's current spec yet", name)
		case accepted.Status != metav1.ConditionTrue:
			return metav1.ConditionFalse, webappv2.ReasonRouteNotAccepted, fmt.Sprintf("Gateway %s does not accept the HTTPRoute: %s: %s", name, accepted.Reason, accepted.Message)
		case resolved != nil && resolved.Status != metav1.ConditionTrue:
			return metav1.ConditionFalse, webappv2.ReasonRouteRefsNotResolved, fmt.Sprintf("Gateway %s cannot resolve the HTTPRoute's backend: %s: %s", name, resolved.Reason, resolved.Message)
		}
		return metav1.ConditionTrue, webappv2.ReasonExposed, fmt.Sprintf("Gateway %s accepted the HTTPRoute (controller %s)", name, p.ControllerName)
	}
	return metav1.ConditionFalse, webappv2.ReasonWaitingForGateway, fmt.Sprintf("no controller of Gateway %s has reported on the HTTPRoute yet (is the Gateway there, and does it allow routes from namespace %s?)", name, app.Namespace)
}

// previewVerdict says why a blue/green's preview host does not reach its new version yet ("" when its Gateway
// accepted the preview route, or there is none): the Gateway's own words, as Exposed says them of the WebApp's route.
func previewVerdict(app *webappv2.WebApp, route *gwv1.HTTPRoute) string {
	if route == nil || app.Spec.Expose == nil || app.Spec.Expose.Gateway == nil {
		return ""
	}
	status, _, msg := gatewayVerdict(app, route)
	if status == metav1.ConditionTrue {
		return ""
	}
	return fmt.Sprintf("the preview host's route %s: %s", route.Name, msg)
}

// mountTrouble says why a volume keeps app's pods from starting ("" when none does): the missing ConfigMaps and
// Secrets, or the owned claim that is not bound while the pods cannot be scheduled (the scheduler's words are
// added: they say why no volume fits). A claim that waits for its first pod to bind is not trouble.
func mountTrouble(app *webappv2.WebApp, missing []string, claim *corev1.PersistentVolumeClaim, podReason, podMsg string) string {
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, strings.Join(missing, ", ")+" not found: the pods cannot start until it exists")
	}
	if v := desired.OwnedClaimVolume(app); v != nil && claim != nil {
		switch {
		case claim.Status.Phase == corev1.ClaimLost:
			parts = append(parts, fmt.Sprintf("claim %q (volume %q) is Lost: its volume is gone", claim.Name, v.Name))
		case claim.Status.Phase != corev1.ClaimBound && podReason == webappv2.ReasonUnschedulable:
			parts = append(parts, fmt.Sprintf("claim %q (volume %q) is not bound: %s", claim.Name, v.Name, podMsg))
		}
	}
	return strings.Join(parts, "; ")
}

// retainedMessage is Ready's message while fields are retained: which, by whom, and how to let them go.
func retainedMessage(app *webappv2.WebApp, fields []webappv2.RetainedField) string {
	var b strings.Builder
	b.WriteString("Fields this WebApp no longer sets stay on its children because another field manager also owns them: ")
	for i, f := range fields {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s %s %s (held by %s)", f.Kind, app.Name, f.Field, strings.Join(f.Managers, ", "))
	}
	b.WriteString(". Remove them from the object (kubectl edit), or have that manager apply without them; " +
		"the WebApp is Ready once no other manager holds them.")
	return truncate(b.String())
}

// CanaryStatus is the status of a decision of the step machine under plan.
func CanaryStatus(d canary.Decision, plan canary.Plan) *webappv2ac.CanaryStatusApplyConfiguration {
	s := d.State
	st := webappv2ac.CanaryStatus().WithPhase(string(d.Phase))
	// Zero values left out, as the server drops them (see Desired).
	if s.Stable != "" {
		st.WithStableRevision(s.Stable)
	}
	if s.Canary != "" {
		// With the kind of strategy it runs: one turned into the other kind starts again (see stateOf).
		st.WithCanaryRevision(s.Canary).WithStrategy(plan.Kind())
	}
	if s.Failed != "" {
		st.WithFailedRevision(s.Failed)
	}
	if s.Step != 0 {
		st.WithStep(int32(s.Step))
	}
	if d.Weight != 0 {
		st.WithWeight(d.Weight)
	}
	if !s.Since.IsZero() {
		st.WithStepStartedAt(metav1.NewTime(s.Since))
	}
	if !s.GateSince.IsZero() {
		st.WithGateSince(metav1.NewTime(s.GateSince))
	}
	if s.Previous != "" {
		st.WithPreviousRevision(s.Previous).WithPreviousUntil(metav1.NewTime(s.PreviousUntil))
	}
	if s.Retiring != "" {
		st.WithRetiringRevision(s.Retiring).WithRetiringSince(metav1.NewTime(s.RetiringSince))
	}
	if s.Held > 0 {
		st.WithHeldReplicas(s.Held)
	}
	if plan.Retire > 0 && (s.Canary != "" || s.Retiring != "" || s.Failed != "" && !s.Since.IsZero()) {
		// While a canary runs or retires: a strategy taken out meanwhile still retires its pods that long.
		st.WithRetireSeconds(int32(plan.Retire / time.Second))
	}
	if s.ActedOn != "" {
		// Whole (canary.MaxAction bounds what acts): compared with the annotation, a cut value would act again.
		st.WithActedOn(s.ActedOn)
	}
	for i, n := range s.Failures {
		if n > 0 && i < len(plan.Checks) {
			st.WithFailures(webappv2ac.CanaryCheckFailures().WithName(plan.Checks[i].Name).WithCount(n))
		}
	}
	for _, e := range s.Evaluations {
		c := webappv2ac.CanaryCheckStatus().WithName(e.Name).WithMax(e.Max).WithPassed(e.Passed).WithAddress(e.Address).WithQuery(e.Query).
			WithEvaluatedAt(metav1.NewTime(e.At))
		if e.Value != "" {
			c.WithValue(e.Value)
		}
		if e.Error != "" {
			c.WithError(pods.TruncateTo(e.Error, 500))
		}
		if !e.NoDataSince.IsZero() {
			c.WithNoDataSince(metav1.NewTime(e.NoDataSince))
		}
		st.WithChecks(c)
	}
	if s.Reason != "" {
		st.WithReason(s.Reason)
	}
	if s.Message != "" {
		st.WithMessage(pods.TruncateTo(s.Message, 1000))
	}
	return st
}

// blueGreenWords say where a blue/green is while its new version runs beside the stable one.
func blueGreenWords(d canary.Decision) string {
	s := d.State
	switch {
	case s.Step == 0:
		return fmt.Sprintf("Blue/green preview of revision %s %s, with none of the production traffic (revision %s serves all of it)", s.Canary, desired.SizeWords(d.ReplicaWeight), s.Stable)
	case d.Weight < 100:
		return fmt.Sprintf("Blue/green switch to revision %s once its pods are ready at full size and, behind a route, the gateway has learnt them (revision %s serves all the traffic until then)", s.Canary, s.Stable)
	}
	words := fmt.Sprintf("Revision %s serves all the traffic since the blue/green switch; revision %s is kept at full size to switch back to (kubectl webapp abort)", s.Canary, s.Stable)
	if s.Held > 0 {
		words += fmt.Sprintf("; the HPA's floor holds it at %d pods, its count at the switch, until the release ends", s.Held)
	}
	return words
}

// keptCanaryStatus is the status as it is, for a reconcile that could not decide the canary.
func keptCanaryStatus(c *webappv2.CanaryStatus) *webappv2ac.CanaryStatusApplyConfiguration {
	st := webappv2ac.CanaryStatus()
	_ = desired.RoundTrip(c, st)
	return st
}

// canaryMessage says where a canary is, for the Ready condition: only what changes with the state (no clock).
func canaryMessage(d canary.Decision, plan canary.Plan) string {
	s := d.State
	switch d.Phase {
	case canary.PhaseRolledBack:
		return fmt.Sprintf("Revision %s was rolled back (%s): %s; revision %s serves. Apply a new spec to try again.", s.Failed, s.Reason, s.Message, s.Stable)
	case canary.PhasePromoting:
		if s.WayBack() && d.None() {
			return fmt.Sprintf("Revision %s serves again: its pods kept warm go once the traffic has left them", s.Canary)
		}
		if s.WayBack() {
			words := fmt.Sprintf("Rolled back to revision %s within the rollback window: its pods kept warm take all the traffic while the Deployment rolls back to it", s.Canary)
			if s.Held > 0 {
				words += fmt.Sprintf("; the HPA's floor stays at %d pods until the Deployment serves it", s.Held)
			}
			return words
		}
		if d.None() {
			return fmt.Sprintf("Revision %s is promoted: the canary is removed once the traffic has left it", s.Canary)
		}
		words := fmt.Sprintf("Revision %s passed every step: the Deployment rolls to it, the canary keeps %s meanwhile", s.Canary, d.Words())
		if s.Held > 0 {
			words += fmt.Sprintf("; the HPA's floor stays at %d pods until the Deployment serves it", s.Held)
		}
		return words
	}
	words := fmt.Sprintf("Canary of revision %s at step %d of %d: %s (revision %s serves the rest)", s.Canary, s.Step+1, len(plan.Steps), d.Words(), s.Stable)
	if plan.BlueGreen {
		words = blueGreenWords(d)
	}
	if !s.GateSince.IsZero() {
		words += fmt.Sprintf("; its gate waits for a person since %s: kubectl webapp promote, or annotate %s=%q",
			s.GateSince.UTC().Format(time.RFC3339), webappv2.AnnotationAction, canary.PromoteStep(s.Canary, s.Step))
	}
	if s.Retiring != "" {
		words += "; " + retiringWords(s, plan.RetireAfter())
	}
	return words
}

// retiringWords say that the pods of a version the spec left retire, and until when.
func retiringWords(s canary.State, after time.Duration) string {
	return fmt.Sprintf("the pods of revision %s, which the spec left, retire first: no traffic is sent to them, and they go at %s (%s after the write that takes the traffic off them, if it succeeds later)", s.Retiring,
		s.RetiringSince.Add(after).UTC().Format(time.RFC3339), after)
}
