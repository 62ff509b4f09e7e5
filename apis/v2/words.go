package v2

// The API's own words: the field manager every write of the operator is sent under, the labels and annotations it
// puts on the objects it owns, and the reasons of the WebApp's conditions and events. They are part of the API (a
// user's selector, an alert or `kubectl wait --for` names them), so they live with its types, and every package
// that speaks of a WebApp (the operator, the conversion webhook, the tests, tools) reads them from here.

const (
	// FieldManager is the one field manager every apply of the operator is sent under; field ownership in
	// managedFields is recorded against it.
	FieldManager = "webapp-operator"

	// LabelName is the recommended name label, put on everything we create (value AppName).
	LabelName = "app.kubernetes.io/name"
	// AppName is the value of LabelName.
	AppName = "webapp"
	// LabelInstance carries the WebApp's name; with LabelName it selects the WebApp's pods.
	LabelInstance = "app.kubernetes.io/instance"
	// LabelManagedBy says the object is ours (value ManagedBy); the operator's cache filters on it.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of LabelManagedBy.
	ManagedBy = "webapp-operator"

	// LabelCanaryOf is on a canary's pods, with the WebApp's name; the canary Deployment and Service select by it.
	LabelCanaryOf = "webapp.example.com/canary-of"
	// LabelCanaryRevision is on a canary's pods: the revision they run.
	LabelCanaryRevision = "webapp.example.com/canary-revision"

	// AnnotationRevision is on the Deployments of a WebApp with a canary strategy: the revision of their pod
	// template (not on the template: setting it must roll no pod).
	AnnotationRevision = "webapp.example.com/revision"
	// AnnotationAction is a person's action on a canary, the user's own write to the WebApp (the operator never
	// writes it): "promote <canaryRevision>/<step>" passes that step now (its pause, checks and gate), "promote
	// <canaryRevision>/full" every step left, "abort <canaryRevision>" rolls that canary back, "retry
	// <failedRevision>" starts a rolled-back version's canary again. Anything after (a time, say) makes a value new.
	// A value acts once, where it makes sense (status.canary.actedOn keeps the last that did, and a value longer than
	// 256 characters acts on nothing), so an action left in place, or applied again from Git, never acts twice in a row.
	AnnotationAction = "webapp.example.com/action"
	// ConfigHashAnnotation on the pod template holds a hash of the data of the ConfigMaps and Secrets the WebApp's
	// environment refers to: when they change, the pod template changes and the Deployment rolls the pods.
	ConfigHashAnnotation = "webapp.example.com/config-hash"
)

// Values of status.replicasSetBy: who decides the count now.
const (
	ReplicasSetByWebApp = "WebApp"
	ReplicasSetByHPA    = "HorizontalPodAutoscaler"
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
	ReasonFieldsRetained           = "FieldsRetained"
)

// Reasons of Ready and Progressing when the pods of a rollout that does not progress say why.
const (
	ReasonImagePullBackOff = "ImagePullBackOff"
	ReasonCrashLoopBackOff = "CrashLoopBackOff"
	ReasonUnschedulable    = "Unschedulable"
	ReasonReadinessFailing = "ReadinessFailing"
	// ReasonMountFailing: a volume keeps the pods of a rollout from starting: a ConfigMap or Secret it mounts is
	// missing, or the claim the WebApp owns is not bound.
	ReasonMountFailing = "MountFailing"
)

// Reasons of a canary rollout (spec.rollout.canary).
const (
	// ReasonCanary is the Ready and Progressing reason while a canary runs.
	ReasonCanary = "Canary"
	// ReasonRolledBack and ReasonCheckFailed end a canary rollout, in the Ready condition and the canary's state.
	ReasonRolledBack  = "RolledBack"
	ReasonCheckFailed = "CheckFailed"
	// ReasonAborted ends a canary a person aborted; ReasonGateTimedOut one whose gate's timeout rolled it back.
	ReasonAborted      = "Aborted"
	ReasonGateTimedOut = "GateTimedOut"
	// ReasonGatewayUnsupported ends a canary whose plan needs what the class of its Gateway does not list as
	// supported (a mirror).
	ReasonGatewayUnsupported = "GatewayUnsupported"
	// ReasonRolledBackToPrevious says a spec set back to the version before a promotion, within the rollback
	// window, was rolled back to at once.
	ReasonRolledBackToPrevious = "RolledBackToPrevious"
	// ReasonCanaryRemoved is the event of an Orphan deletion that deleted a canary's objects.
	ReasonCanaryRemoved = "CanaryRemoved"
)

// Reasons of the Exposed condition.
const (
	ReasonExposed              = "Exposed"
	ReasonGatewayAPIMissing    = "GatewayAPINotInstalled"
	ReasonWaitingForGateway    = "WaitingForGateway"
	ReasonWaitingForAddress    = "WaitingForAddress"
	ReasonRouteNotAccepted     = "RouteNotAccepted"
	ReasonRouteRefsNotResolved = "RouteRefsNotResolved"
)
