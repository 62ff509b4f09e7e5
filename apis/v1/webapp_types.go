package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	// ConditionReady is the summary condition: True once the Deployment of the WebApp's current generation is
	// fully rolled out and available. It is the condition `kubectl wait --for=condition=Ready` waits for.
	ConditionReady = "Ready"
	// ConditionProgressing is True while a rollout is under way, and False once it completed or when the
	// Deployment exceeded its progress deadline.
	ConditionProgressing = "Progressing"

	// Finalizer is put on a WebApp only while its deletion policy is Orphan: deleting it then needs the operator
	// to release the Deployment and Service first, which garbage collection cannot do.
	Finalizer = "example.com/finalizer"
)

// DeletionPolicy says what happens to the Deployment and Service when their WebApp is deleted.
// +kubebuilder:validation:Enum=Delete;Orphan
type DeletionPolicy string

const (
	// DeletionPolicyDelete deletes the Deployment and Service with the WebApp (owner-reference garbage collection).
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyOrphan keeps the Deployment and Service running when the WebApp is deleted; the operator
	// removes its owner reference from them first.
	DeletionPolicyOrphan DeletionPolicy = "Orphan"
)

// WebAppSpec says what to run: an image, how many replicas of it, and the port it serves on; and, optionally,
// how (environment, resources, probes, pull secrets, pod labels, rollout, security) and how to expose it.
// +kubebuilder:validation:XValidation:rule="!(has(self.healthCheckPath) && has(self.readinessProbe))",message="set healthCheckPath or readinessProbe, not both"
type WebAppSpec struct {
	// Image is the container image to run, e.g. nginx:1.25. Required, with no whitespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^\S+$`
	// +required
	Image string `json:"image"`

	// Replicas is the number of pods to run, 1 to 10. The scale subresource sets it, so
	// `kubectl scale webapp NAME --replicas=N` and an HorizontalPodAutoscaler work.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +kubebuilder:default=1
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// Port is the TCP port the container listens on and the Service exposes, 1 to 65535.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=80
	// +optional
	Port int32 `json:"port,omitempty"`

	// ProgressDeadlineSeconds is how long a rollout may make no progress before the Deployment, and the WebApp's
	// Progressing and Ready conditions, report ProgressDeadlineExceeded.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +kubebuilder:default=600
	// +optional
	ProgressDeadlineSeconds int32 `json:"progressDeadlineSeconds,omitempty"`

	// DeletionPolicy says what happens to the Deployment and Service when the WebApp is deleted: Delete (the
	// default) deletes them with it; Orphan leaves them running, without an owner.
	// +kubebuilder:default=Delete
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// Command overrides the image's entrypoint.
	// +listType=atomic
	// +optional
	Command []string `json:"command,omitempty"`

	// Args overrides the image's arguments.
	// +listType=atomic
	// +optional
	Args []string `json:"args,omitempty"`

	// Env sets environment variables of the container: a value, or a key of a ConfigMap or Secret (valueFrom).
	// When a referenced ConfigMap or Secret changes, the pods are rolled.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// EnvFrom sets environment variables from every key of ConfigMaps or Secrets. When one changes, the pods
	// are rolled.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +optional
	EnvFrom []corev1.EnvFromSource `json:"envFrom,omitempty"`

	// Resources are the container's compute resource requests and limits.
	// +kubebuilder:validation:XValidation:rule="!has(self.claims)",message="resources.claims is not supported: the WebApp's pods have no resource claims"
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty,omitzero"`

	// HealthCheckPath makes the readiness probe an HTTP GET of this path on the port (default: a TCP check of the
	// port). Not together with readinessProbe.
	// +kubebuilder:validation:Pattern=`^/\S*$`
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	HealthCheckPath string `json:"healthCheckPath,omitempty"`

	// ReadinessProbe replaces the default readiness probe entirely.
	// +optional
	ReadinessProbe *corev1.Probe `json:"readinessProbe,omitempty"`

	// LivenessProbe, when set, restarts the container when it fails.
	// +optional
	LivenessProbe *corev1.Probe `json:"livenessProbe,omitempty"`

	// ImagePullSecrets name Secrets in the WebApp's namespace with credentials for the image registry.
	// +listType=map
	// +listMapKey=name
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// ImagePullPolicy is Always, IfNotPresent or Never (default: the cluster's, IfNotPresent unless the tag is
	// latest).
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// Service configures the Service.
	// +optional
	Service ServiceSpec `json:"service,omitempty,omitzero"`

	// PodLabels are added to the pods. The operator's own labels (app.kubernetes.io/name, instance and
	// managed-by, and any key under webapp.example.com/) cannot be set here.
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k in ['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/managed-by'])",message="podLabels must not set app.kubernetes.io/name, app.kubernetes.io/instance or app.kubernetes.io/managed-by: the operator sets them and selects pods by them"
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k.startsWith('webapp.example.com/'))",message="podLabels must not set a key under webapp.example.com/ (canary-of, canary-revision): the operator's own labels, by which a canary's Deployment and Service select its pods"
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	PodLabels map[string]string `json:"podLabels,omitempty"`

	// PodAnnotations are added to the pods. Keys under webapp.example.com/ (the config hash) cannot be set here.
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k.startsWith('webapp.example.com/'))",message="podAnnotations must not set a key under webapp.example.com/ (config-hash): the operator's own, by which a change of the referenced ConfigMaps and Secrets rolls the pods"
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`

	// Strategy tunes the rolling update.
	// +optional
	Strategy RollingUpdate `json:"strategy,omitempty,omitzero"`

	// RevisionHistoryLimit is how many old ReplicaSets the Deployment keeps for rollback (default 10).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// PodSecurity is the Pod Security Standard the pods are made to meet. Restricted (the default) runs as
	// non-root with no privilege escalation, all capabilities dropped and the RuntimeDefault seccomp profile.
	// Baseline is the opt-out for images that must run as root (nginx:1.25, say): RuntimeDefault seccomp and no
	// privilege escalation, with the image's user and the default capabilities.
	// +kubebuilder:validation:Enum=Restricted;Baseline
	// +kubebuilder:default=Restricted
	// +optional
	PodSecurity PodSecurity `json:"podSecurity,omitempty"`
}

// PodSecurity names a Pod Security Standard level.
type PodSecurity string

const (
	// PodSecurityRestricted meets the restricted Pod Security Standard.
	PodSecurityRestricted PodSecurity = "Restricted"
	// PodSecurityBaseline meets the baseline Pod Security Standard, for images that must run as root.
	PodSecurityBaseline PodSecurity = "Baseline"
)

// ServiceSpec configures the WebApp's Service.
type ServiceSpec struct {
	// Type is ClusterIP (the default), NodePort or LoadBalancer.
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +kubebuilder:default=ClusterIP
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`

	// Annotations are added to the Service (a cloud load balancer's settings, say). kubectl's
	// last-applied-configuration annotation is refused: it is kubectl's record of a client-side apply, not a setting.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="!('kubectl.kubernetes.io/last-applied-configuration' in self)",message="service.annotations must not set kubectl.kubernetes.io/last-applied-configuration: it is kubectl's own record of a client-side apply"
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// RollingUpdate tunes the Deployment's rolling update.
type RollingUpdate struct {
	// MaxSurge is how many pods, or what percentage, may run above replicas during a rollout (default 25%).
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`

	// MaxUnavailable is how many pods, or what percentage, may be unavailable during a rollout (default 25%).
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// WebAppStatus is what the operator observed at its last reconcile.
type WebAppStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Replicas is the number of pods of the Deployment (read by the scale subresource).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// AvailableReplicas is the number of the Deployment's pods that are available.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`

	// DesiredReplicas is the number of pods the WebApp asks for now: spec.replicas, or with autoscaling the
	// HorizontalPodAutoscaler's decision.
	// +optional
	DesiredReplicas int32 `json:"desiredReplicas,omitempty"`

	// ReplicasSetBy says who decides the number of pods: WebApp (spec.replicas) or HorizontalPodAutoscaler.
	// +kubebuilder:validation:Enum=WebApp;HorizontalPodAutoscaler
	// +optional
	ReplicasSetBy string `json:"replicasSetBy,omitempty"`

	// Selector is the label selector of the pods, in string form (read by the scale subresource).
	// +optional
	Selector string `json:"selector,omitempty"`

	// URL is the in-cluster address of the Service, e.g. http://nginx-app.default.svc:80.
	// +optional
	URL string `json:"url,omitempty"`

	// URLs are every host and path spec.expose routes (v2's field), in its order.
	// +listType=atomic
	// +optional
	URLs []string `json:"urls,omitempty"`

	// Conditions are the latest observations of the WebApp's state; Ready is the summary.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// RetainedFields are fields of the children that the WebApp no longer sets but that stay, because another
	// field manager also owns them (a child re-created from an exported manifest, say). While there are any, Ready
	// is False with reason FieldsRetained: the spec is not fully applied until they are removed or released.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +optional
	RetainedFields []RetainedField `json:"retainedFields,omitempty"`

	// ConversionDropped says what the last write through v1 carried for v2-only fields that v2's schema refuses
	// (conversion data written by hand or forged): those fields were stored as v1 alone says them (ports as v1's
	// one port, no autoscaling, no expose), never with the refused data. The next write through v1 that carries
	// nothing refused removes it.
	// +optional
	ConversionDropped *ConversionDropped `json:"conversionDropped,omitempty"`

	// Canary is where a canary rollout is (spec.rollout.canary of v2): the revisions of the stable and the canary
	// version, the step, and why the last canary was rolled back.
	// +optional
	Canary *CanaryStatus `json:"canary,omitempty"`

	// ConversionData keeps, while the WebApp is read as v1, what its v2 spec says that v1 cannot (an unset field
	// that v1 shows with its default, more ports, autoscaling, expose, volumes and the rest of the pod), as JSON.
	// The conversion to v2 restores it.
	// It lives in the status because no write to the WebApp itself can change the status, and no field manager
	// owns what such a write sends there: a v1 client that reads, edits and writes (or applies an export) keeps
	// every v2-only field without owning or forging it. Written by conversion only.
	// +optional
	ConversionData string `json:"conversionData,omitempty"`
}

// ConversionDropped names what a write through v1 carried that v2's schema refuses, and why.
type ConversionDropped struct {
	// Generation is the WebApp's generation after that write.
	Generation int64 `json:"generation"`

	// Fields are the v2 fields whose conversion data was refused, e.g. spec.expose.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	Fields []string `json:"fields"`

	// Message is v2's validation errors.
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message"`
}

// RetainedField is a field of a child that the WebApp no longer sets and that another field manager still holds.
type RetainedField struct {
	// Kind is the child's kind: Deployment, Service or PodDisruptionBudget (the child has the WebApp's name).
	// +kubebuilder:validation:MaxLength=64
	Kind string `json:"kind"`

	// Field is the field's path, as Server-Side Apply names it, e.g.
	// .spec.template.spec.containers[name="app"].env[name="DEBUG"].
	// +kubebuilder:validation:MaxLength=1024
	Field string `json:"field"`

	// Managers are the field managers that hold it (metadata.managedFields of the child).
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=256
	Managers []string `json:"managers"`
}

// WebApp runs a container image as a Deployment and exposes it with a Service of the same name.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=webapps,scope=Namespaced,shortName=wa,categories=all
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label (at most 63 lowercase letters, digits or '-', starting with a letter and ending with a letter or digit) because it also names the Service",fieldPath=.metadata
type WebApp struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec WebAppSpec `json:"spec"`
	// +optional
	Status WebAppStatus `json:"status,omitempty"`
}

// WebAppList is a list of WebApps.
//
// +kubebuilder:object:root=true
type WebAppList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WebApp `json:"items"`
}

// CanaryStatus is where a canary rollout is. A revision is a hash of the pods' template (with the config hash).
type CanaryStatus struct {
	// Phase is Stable (no canary), Canary (a canary runs at a step), Promoting (every step passed; the stable
	// Deployment rolls to the canary's version) or RolledBack (the canary was stopped; the stable version serves
	// until the spec changes).
	// +kubebuilder:validation:Enum=Stable;Canary;Promoting;RolledBack
	Phase string `json:"phase"`

	// StableRevision is the version that serves, from the WebApp's own Deployment.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	StableRevision string `json:"stableRevision,omitempty"`

	// CanaryRevision is the version being tried, in <name>-canary.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	CanaryRevision string `json:"canaryRevision,omitempty"`

	// FailedRevision is the last version rolled back: applying it again does not start it again.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	FailedRevision string `json:"failedRevision,omitempty"`

	// Step is the index of the canary's step in spec.rollout.canary.steps.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	// +optional
	Step int32 `json:"step,omitempty"`

	// Weight is the canary's share of the traffic now, in percent.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Weight int32 `json:"weight,omitempty"`

	// Strategy is the kind of strategy the canary runs (Steps or BlueGreen; unset: the status predates it): a canary
	// whose strategy turns from one kind into the other starts again at the first step of the new one, so a
	// blue/green's switch always follows its own preview.
	// +kubebuilder:validation:Enum=Steps;BlueGreen
	// +optional
	Strategy string `json:"strategy,omitempty"`

	// StepStartedAt is when the step's pause started: when the canary was first seen serving its weight.
	// +optional
	StepStartedAt *metav1.Time `json:"stepStartedAt,omitempty"`

	// GateSince is when the step's gate began to wait for a person (its pause over and its checks passing).
	// +optional
	GateSince *metav1.Time `json:"gateSince,omitempty"`

	// PreviousRevision is the version the last promotion replaced, while spec.rollout.canary.rollbackWindowSeconds
	// keeps it known: setting the spec back to it until previousUntil rolls the stable Deployment straight back to
	// it, without a canary.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	PreviousRevision string `json:"previousRevision,omitempty"`

	// PreviousUntil is when the rollback window of previousRevision ends.
	// +optional
	PreviousUntil *metav1.Time `json:"previousUntil,omitempty"`

	// ActedOn is the last value of the annotation webapp.example.com/action that took effect: a value acts once.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	ActedOn string `json:"actedOn,omitempty"`

	// RetiringRevision is a canary's version that the spec left (set back, or changed again) while the route sent
	// it traffic: its pods stay as they are, the route sending them nothing, until retiringSince plus 10 s, so the
	// requests already on their way to them are answered; then they go (and a new version's canary starts).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	RetiringRevision string `json:"retiringRevision,omitempty"`

	// RetiringSince is when the route left retiringRevision's pods.
	// +optional
	RetiringSince *metav1.Time `json:"retiringSince,omitempty"`

	// RetireSeconds is the strategy's retireSeconds while a canary runs or retires (unset: the default, 10): a
	// strategy taken out meanwhile still retires the pods that long.
	// +kubebuilder:validation:Minimum=0
	// +optional
	RetireSeconds int32 `json:"retireSeconds,omitempty"`

	// HeldReplicas is the stable Deployment's count at a blue/green's switch, under autoscaling: from the switch
	// until the release ends, the HorizontalPodAutoscaler's minReplicas is at least this, since the stable pods then
	// serve nothing and the HPA, which measures them, would shrink both versions.
	// +kubebuilder:validation:Minimum=0
	// +optional
	HeldReplicas int32 `json:"heldReplicas,omitempty"`

	// Failures counts each check's failed evaluations in this canary.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=5
	// +optional
	Failures []CanaryCheckFailures `json:"failures,omitempty"`

	// Checks are each check's last evaluation in this canary, kept after a rollback as its evidence: the value
	// against its limit, whether it passed, and the server and query that produced it.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=5
	// +optional
	Checks []CanaryCheckStatus `json:"checks,omitempty"`

	// Reason and Message say why the last canary was rolled back: its pods' trouble (ImagePullFailed,
	// CrashLoopBackOff, ...) or CheckFailed, with the check's value.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Reason string `json:"reason,omitempty"`
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
}

// CanaryCheckStatus is a check's last evaluation.
type CanaryCheckStatus struct {
	// Name is the check's name.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Value is the value the query gave, to four significant digits (empty when it gave none: error says why).
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Value string `json:"value,omitempty"`
	// Max is the greatest value that passes, as the check said when it was evaluated.
	// +kubebuilder:validation:MaxLength=32
	Max string `json:"max"`
	// Passed: the value was a finite number not above max.
	Passed bool `json:"passed"`
	// Error is why the query gave no value that counts (the server's error, no series, not a finite number).
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Error string `json:"error,omitempty"`
	// Address is the Prometheus server that was asked, or the webhook's URL.
	// +kubebuilder:validation:MaxLength=2048
	Address string `json:"address"`
	// Query is the query it was asked (empty for a webhook).
	// +kubebuilder:validation:MaxLength=4096
	Query string `json:"query"`
	// EvaluatedAt is when the evaluation started.
	EvaluatedAt metav1.Time `json:"evaluatedAt"`
	// NoDataSince is when the check, waiting for data (onNoData: Wait), first gave no value in a row.
	// +optional
	NoDataSince *metav1.Time `json:"noDataSince,omitempty"`
}

// CanaryCheckFailures is how often a check failed in the current canary.
type CanaryCheckFailures struct {
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// +kubebuilder:validation:Minimum=0
	Count int32 `json:"count"`
}
