package v2

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
	// ConditionExposed is set on a WebApp with spec.expose: True once the Ingress controller published an address for
	// its Ingress, or the Gateway accepted its HTTPRoute and resolved its backend.
	ConditionExposed = "Exposed"

	// Finalizer is put on a WebApp only while its deletion policy is Orphan: deleting it then needs the operator
	// to release its children first, which garbage collection cannot do.
	Finalizer = "example.com/finalizer"

	// DefaultReplicas is the number of pods of a WebApp whose spec.replicas is unset.
	DefaultReplicas int32 = 1
	// DefaultProgressDeadlineSeconds is the progress deadline of a WebApp whose rollout.progressDeadlineSeconds is
	// unset.
	DefaultProgressDeadlineSeconds int32 = 600
)

// DeletionPolicy says what happens to the children when their WebApp is deleted.
// +kubebuilder:validation:Enum=Delete;Orphan
type DeletionPolicy string

const (
	// DeletionPolicyDelete deletes the children with the WebApp (owner-reference garbage collection).
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyOrphan keeps the children running when the WebApp is deleted; the operator removes its owner
	// reference from them first.
	DeletionPolicyOrphan DeletionPolicy = "Orphan"
)

// WebAppSpec says what to run: an image, how many replicas of it and the ports it serves on, then in sections how
// the container, the pods, the rollout and the Service are set up.
//
// Compared with v1: replicas has no default (unset means 1, and leaves room for an autoscaler to own the count);
// there is a list of named ports instead of one port; the container's, the pods' and the rollout's settings each
// have a section of their own.
// +kubebuilder:validation:XValidation:rule="!has(self.container) || !has(self.container.volumeMounts) || self.container.volumeMounts.all(m, has(self.volumes) && self.volumes.exists(v, v.name == m.name))",message="every container.volumeMounts[].name must name a volume of spec.volumes"
// +kubebuilder:validation:XValidation:rule="!has(self.pod) || !has(self.pod.initContainers) || self.pod.initContainers.all(c, !has(c.volumeMounts) || c.volumeMounts.all(m, has(self.volumes) && self.volumes.exists(v, v.name == m.name)))",message="every pod.initContainers[].volumeMounts[].name must name a volume of spec.volumes"
// +kubebuilder:validation:XValidation:rule="!has(self.volumes) || self.volumes.filter(v, has(v.claim)).size() <= 1",message="a WebApp owns at most one claim (volumes[].claim); mount more through persistentVolumeClaim"
// +kubebuilder:validation:XValidation:rule="!has(self.volumes) || !self.volumes.exists(v, has(v.claim) && (!has(v.claim.accessMode) || v.claim.accessMode == 'ReadWriteOnce' || v.claim.accessMode == 'ReadWriteOncePod')) || ((!has(self.replicas) || self.replicas == 1) && !has(self.autoscaling) && (!has(self.rollout) || (!has(self.rollout.maxSurge) && !has(self.rollout.maxUnavailable) && !has(self.rollout.canary))))",message="a ReadWriteOnce or ReadWriteOncePod claim is mounted by one pod at a time: the WebApp runs one replica (no autoscaling) and rolls out by Recreate (no rollout.maxSurge, rollout.maxUnavailable or rollout.canary); use ReadWriteMany for more"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.volumes) || !has(self.volumes) || oldSelf.volumes.all(o, !has(o.claim) || self.volumes.all(n, !has(n.claim) || (has(n.claim.storageClassName) == has(o.claim.storageClassName) && (!has(n.claim.storageClassName) || n.claim.storageClassName == o.claim.storageClassName))))",message="claim.storageClassName cannot change, whatever the claim volume is named: the claim is the WebApp's PersistentVolumeClaim of its name, and a claim's storage class is immutable (remove the claim volume and delete the released claim first, or use a new WebApp)"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.volumes) || !has(self.volumes) || oldSelf.volumes.all(o, !has(o.claim) || self.volumes.all(n, !has(n.claim) || (has(n.claim.accessMode) ? n.claim.accessMode : 'ReadWriteOnce') == (has(o.claim.accessMode) ? o.claim.accessMode : 'ReadWriteOnce')))",message="claim.accessMode cannot change, whatever the claim volume is named: the claim is the WebApp's PersistentVolumeClaim of its name, and a claim's access modes are immutable (remove the claim volume and delete the released claim first, or use a new WebApp)"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.volumes) || !has(self.volumes) || oldSelf.volumes.all(o, !has(o.claim) || self.volumes.all(n, !has(n.claim) || !quantity(n.claim.size).isLessThan(quantity(o.claim.size))))",message="claim.size cannot shrink, whatever the claim volume is named: the claim is the WebApp's PersistentVolumeClaim of its name, and a claim is never resized down"
// +kubebuilder:validation:XValidation:rule="!has(self.container) || !has(self.container.writablePaths) || !has(self.container.volumeMounts) || self.container.writablePaths.all(p, !self.container.volumeMounts.exists(m, m.mountPath == p))",message="a path cannot be both in container.writablePaths and a container.volumeMounts[].mountPath"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.rollout.canary) || !has(self.rollout.canary.steps) || !self.rollout.canary.steps.exists(s, has(s.matches) || has(s.mirrorPercent)) || (has(self.expose) && has(self.expose.gateway))",message="rollout.canary.steps[].matches and mirrorPercent route requests by the WebApp's HTTPRoute: they need expose.gateway"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.rollout.canary) || !has(self.rollout.canary.keepPreviousWarm) || !self.rollout.canary.keepPreviousWarm || has(self.rollout.canary.blueGreen) || (has(self.expose) && has(self.expose.gateway))",message="rollout.canary.keepPreviousWarm sends the traffic back to the version kept warm by the WebApp's HTTPRoute, or by its Service's selector with blueGreen: with steps, it needs expose.gateway (their split by replicas would send the kept pods their share of the traffic)"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.rollout.canary) || !has(self.rollout.canary.blueGreen) || !has(self.rollout.canary.blueGreen.previewHost) || (has(self.expose) && (has(self.expose.gateway) || has(self.expose.ingress)))",message="rollout.canary.blueGreen.previewHost is a second HTTPRoute on expose's Gateway, or a second Ingress of expose's class: it needs expose.gateway or expose.ingress (without either, the preview is the Service <name>-canary)"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.rollout.canary) || !has(self.rollout.canary.blueGreen) || !has(self.rollout.canary.blueGreen.previewHost) || !has(self.expose) || !(self.rollout.canary.blueGreen.previewHost in self.expose.hosts)",message="rollout.canary.blueGreen.previewHost must not be one of expose.hosts: the preview route (or Ingress) would take that host's traffic from the WebApp's own"
// +kubebuilder:validation:XValidation:rule="!has(self.container) || !has(self.container.drainSeconds) || self.container.drainSeconds < (has(self.pod) && has(self.pod.terminationGracePeriodSeconds) ? self.pod.terminationGracePeriodSeconds : 30)",message="container.drainSeconds must be less than pod.terminationGracePeriodSeconds (default 30): the drain is part of the grace period"
type WebAppSpec struct {
	// Image is the container image to run, e.g. nginx:1.25. Required, with no whitespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^\S+$`
	// +required
	Image string `json:"image"`

	// Replicas is the number of pods to run, 1 to 10; unset means 1. The scale subresource sets it, so
	// `kubectl scale webapp NAME --replicas=N` and an HorizontalPodAutoscaler work.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Ports are the TCP ports the container listens on, each exposed by the Service under its name. The first is
	// the primary port: the default readiness check and healthCheckPath probe it, and status.url names it.
	// Default: one port, http, 80.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:default={{name: http, port: 80}}
	// +kubebuilder:validation:XValidation:rule="self.all(p, self.exists_one(q, q.port == p.port))",message="ports must not repeat a port number"
	// +optional
	Ports []Port `json:"ports,omitempty"`

	// Container configures the app's container: command, environment, resources, probes, pull policy.
	// +optional
	Container ContainerSpec `json:"container,omitempty,omitzero"`

	// Pod configures the pods: labels, annotations, pull secrets and the Pod Security Standard they meet.
	// +optional
	Pod PodSpec `json:"pod,omitempty,omitzero"`

	// Rollout tunes the Deployment's rolling update.
	// +optional
	Rollout RolloutSpec `json:"rollout,omitempty,omitzero"`

	// Service configures the Service.
	// +optional
	Service ServiceSpec `json:"service,omitempty,omitzero"`

	// Autoscaling, when set, has an HorizontalPodAutoscaler of the WebApp's name decide the number of pods, between
	// minReplicas and maxReplicas, from the pods' CPU and memory use (metrics-server or another resource-metrics API
	// must run in the cluster). spec.replicas is then not used; removing autoscaling hands the count back to it.
	// +optional
	Autoscaling *Autoscaling `json:"autoscaling,omitempty"`

	// Expose, when set, makes the app reachable from outside the cluster by host and path prefix: through a Gateway
	// (an HTTPRoute of the WebApp's name attached to it; Gateway API must be installed) or an Ingress controller
	// (an Ingress of the WebApp's name and the controller's class). Removing it removes the route.
	// +optional
	Expose *Expose `json:"expose,omitempty"`

	// Volumes are the pods' volumes: ConfigMap and Secret files, scratch directories, an existing claim or one the
	// WebApp owns. Containers mount them by name (container.volumeMounts, pod.initContainers[].volumeMounts).
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Volumes []Volume `json:"volumes,omitempty"`

	// DeletionPolicy says what happens to the children when the WebApp is deleted: Delete (the default) deletes
	// them with it; Orphan leaves them running, without an owner.
	// +kubebuilder:default=Delete
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// Autoscaling configures the WebApp's HorizontalPodAutoscaler.
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="autoscaling.minReplicas must not be above autoscaling.maxReplicas"
type Autoscaling struct {
	// MinReplicas is the fewest pods the autoscaler keeps (default 1).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// MaxReplicas is the most pods the autoscaler runs.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +required
	MaxReplicas int32 `json:"maxReplicas"`

	// TargetCPUUtilizationPercentage is the average CPU use the autoscaler aims at, in percent of the container's
	// CPU request (so the container needs one: container.resources.requests.cpu). When neither target is set, it is
	// 80.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	TargetCPUUtilizationPercentage *int32 `json:"targetCPUUtilizationPercentage,omitempty"`

	// TargetMemoryUtilizationPercentage is the average memory use the autoscaler aims at, in percent of the
	// container's memory request.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	TargetMemoryUtilizationPercentage *int32 `json:"targetMemoryUtilizationPercentage,omitempty"`

	// Behavior tunes how fast the autoscaler scales up and down (the HorizontalPodAutoscaler's own field; its
	// defaults: up at once, down after 5 minutes of lower use).
	// +optional
	Behavior *AutoscalingBehavior `json:"behavior,omitempty"`
}

// AutoscalingBehavior is the HorizontalPodAutoscaler's behavior (autoscaling/v2 HorizontalPodAutoscalerBehavior, the
// same fields), held to the bounds the HorizontalPodAutoscaler API enforces: a WebApp cannot ask for an
// autoscaler the API would refuse.
type AutoscalingBehavior struct {
	// ScaleUp is how the autoscaler scales up. Unset: at once (no stabilization window), by at most 4 pods or
	// double the pods, whichever is more, every 15 seconds.
	// +optional
	ScaleUp *ScalingRules `json:"scaleUp,omitempty"`

	// ScaleDown is how the autoscaler scales down. Unset: after a 300-second stabilization window, by up to all the
	// pods above minReplicas every 15 seconds.
	// +optional
	ScaleDown *ScalingRules `json:"scaleDown,omitempty"`
}

// ScalingRules are the rules of one direction of scaling (autoscaling/v2 HPAScalingRules); a field left unset
// takes the HorizontalPodAutoscaler's default for that direction.
type ScalingRules struct {
	// StabilizationWindowSeconds is how far back, in seconds, the autoscaler looks at its past recommendations and
	// takes the safest one: from 0 to 3600 (one hour).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +optional
	StabilizationWindowSeconds *int32 `json:"stabilizationWindowSeconds,omitempty"`

	// SelectPolicy picks among the policies: Max (the most change, the default), Min (the least) or Disabled (no
	// scaling in this direction).
	// +kubebuilder:validation:Enum=Max;Min;Disabled
	// +optional
	SelectPolicy *autoscalingv2.ScalingPolicySelect `json:"selectPolicy,omitempty"`

	// Policies limit the change over a period; with none given (the field left out), the direction's defaults.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +optional
	Policies []ScalingPolicy `json:"policies,omitempty"`

	// Tolerance is the ratio of the current to the desired metric value within which the count is left as it is
	// (e.g. 0.05 or 50m for 5%; the cluster's default, 10%, when unset). Not negative.
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || !quantity(string(self)).isLessThan(quantity('0'))",message="autoscaling tolerance must not be negative"
	// +optional
	Tolerance *resource.Quantity `json:"tolerance,omitempty"`
}

// ScalingPolicy allows at most a change of value pods (Pods) or percent of the pods (Percent) within any
// periodSeconds (autoscaling/v2 HPAScalingPolicy).
type ScalingPolicy struct {
	// Type is what value counts: Pods or Percent.
	// +kubebuilder:validation:Enum=Pods;Percent
	// +required
	Type autoscalingv2.HPAScalingPolicyType `json:"type"`

	// Value is the most change allowed within the period: at least 1.
	// +kubebuilder:validation:Minimum=1
	// +required
	Value int32 `json:"value"`

	// PeriodSeconds is the period the change is counted over: from 1 to 1800 seconds (30 minutes).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1800
	// +required
	PeriodSeconds int32 `json:"periodSeconds"`
}

// Expose routes requests for the WebApp's hosts and path prefixes to its Service's primary port.
// +kubebuilder:validation:XValidation:rule="has(self.gateway) != has(self.ingress)",message="expose needs exactly one of gateway (an HTTPRoute) or ingress (an Ingress)"
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || has(self.ingress)",message="expose.tls is for an Ingress: with a gateway, TLS is set on the Gateway's listener (its certificateRefs)"
type Expose struct {
	// Hosts are the host names the app answers to, e.g. shop.example.com; a leading "*." matches any one label.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +required
	Hosts []Hostname `json:"hosts"`

	// Paths are the path prefixes routed to the app, each starting with "/" (default: "/", everything).
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Paths []PathPrefix `json:"paths,omitempty"`

	// Gateway is the Gateway the WebApp's HTTPRoute attaches to.
	// +optional
	Gateway *GatewayRef `json:"gateway,omitempty"`

	// Ingress has the WebApp exposed by an Ingress of this class.
	// +optional
	Ingress *IngressRef `json:"ingress,omitempty"`

	// TLS terminates HTTPS for the hosts with the certificate and key of a Secret (type kubernetes.io/tls) in the
	// WebApp's namespace (Ingress only).
	// +optional
	TLS *ExposeTLS `json:"tls,omitempty"`
}

// Hostname is a DNS name, lowercase, optionally with a leading "*." wildcard label; not an IP address.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]+([.][0-9]+){3}$')",message="a host must be a DNS name, not an IP address"
// +kubebuilder:validation:Pattern=`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
type Hostname string

// PathPrefix is an absolute URL path without query or fragment; a "%" starts an escape of two hex digits, and an
// escaped "/" (%2F) is refused, as the Ingress and HTTPRoute APIs do.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=1024
// +kubebuilder:validation:Pattern=`^/([A-Za-z0-9._~!$&'()*+,;=:@/-]|%[0-9A-Fa-f]{2})*$`
// +kubebuilder:validation:XValidation:rule="!self.contains('//') && !self.contains('/./') && !self.contains('/../') && !self.endsWith('/..') && !self.endsWith('/.')",message="a path must not contain '//' or '.' and '..' segments"
// +kubebuilder:validation:XValidation:rule="!self.lowerAscii().contains('%2f')",message="a path must not contain an escaped '/' (%2F)"
type PathPrefix string

// GatewayRef names a Gateway (gateway.networking.k8s.io/v1).
type GatewayRef struct {
	// Name is the Gateway's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Name string `json:"name"`

	// Namespace is the Gateway's namespace (default: the WebApp's). The Gateway's listeners must allow routes from
	// the WebApp's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// SectionName is the name of the Gateway's listener to attach to (default: every listener that allows it).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	SectionName string `json:"sectionName,omitempty"`
}

// IngressRef names an IngressClass.
type IngressRef struct {
	// ClassName is the IngressClass of the Ingress controller that serves the WebApp.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	ClassName string `json:"className"`
}

// ExposeTLS names the Secret with the certificate for the hosts.
type ExposeTLS struct {
	// SecretName is a Secret of type kubernetes.io/tls in the WebApp's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	SecretName string `json:"secretName"`
}

// DefaultTargetCPUUtilizationPercentage is the CPU target of an autoscaling WebApp that sets no target.
const DefaultTargetCPUUtilizationPercentage int32 = 80

// Port is one named TCP port of the container, exposed by the Service with the same number.
type Port struct {
	// Name names the port in the container and the Service (an IANA service name: at most 15 lowercase letters,
	// digits and '-', starting with a letter).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="!self.contains('--')",message="a port name must not contain '--'"
	// +required
	Name string `json:"name"`

	// Port is the port number, 1 to 65535.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +required
	Port int32 `json:"port"`
}

// ContainerSpec configures the app's one container.
// +kubebuilder:validation:XValidation:rule="!(has(self.healthCheckPath) && has(self.readinessProbe))",message="set container.healthCheckPath or container.readinessProbe, not both"
type ContainerSpec struct {
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
	// +kubebuilder:validation:XValidation:rule="!has(self.claims)",message="container.resources.claims is not supported: the WebApp's pods have no resource claims"
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty,omitzero"`

	// ImagePullPolicy is Always, IfNotPresent or Never (default: the cluster's, IfNotPresent unless the tag is
	// latest).
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// HealthCheckPath makes the readiness probe an HTTP GET of this path on the primary port (default: a TCP check
	// of that port). Not together with readinessProbe.
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

	// StartupProbe, when set, holds the readiness and liveness probes back until it passes once (for an app that
	// starts slowly).
	// +optional
	StartupProbe *corev1.Probe `json:"startupProbe,omitempty"`

	// VolumeMounts mount volumes of spec.volumes into the container, each at its own path.
	// +listType=map
	// +listMapKey=mountPath
	// +kubebuilder:validation:MaxItems=32
	// +optional
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`

	// ReadOnlyRootFilesystem makes the container's root filesystem read-only; writablePaths stay writable.
	// +optional
	ReadOnlyRootFilesystem bool `json:"readOnlyRootFilesystem,omitempty"`

	// WritablePaths are directories the container can write to whatever its root filesystem (e.g. /tmp,
	// /var/cache/nginx): each is an emptyDir of the pod, empty at every start.
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +optional
	WritablePaths []AbsolutePath `json:"writablePaths,omitempty"`

	// DrainSeconds is how long a stopping pod keeps serving before the container is told to stop (a preStop sleep
	// that needs no shell in the image): long enough for the endpoints, the Gateway and kube-proxy to stop sending
	// it requests. 1 to 3600, below pod.terminationGracePeriodSeconds.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	DrainSeconds int32 `json:"drainSeconds,omitempty"`
}

// AbsolutePath is an absolute path in a container, without ':' or '..' segments, and clean (no trailing '/', no
// '//', no '.' segment), so that one directory is one string (the rules against a path taken twice compare strings).
// +kubebuilder:validation:MinLength=2
// +kubebuilder:validation:MaxLength=1024
// +kubebuilder:validation:Pattern=`^/[^:]*$`
// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.](/|$)')",message="a path must not contain '..' segments"
// +kubebuilder:validation:XValidation:rule="!self.endsWith('/') && !self.contains('//') && !self.contains('/./') && !self.endsWith('/.')",message="a path must be a clean absolute path (no trailing '/', no '//', no '.' segment; e.g. /tmp, not /tmp/, //tmp or /tmp/.): two spellings of one directory would be two mounts at one path"
type AbsolutePath string

// PodSpec configures the WebApp's pods.
// +kubebuilder:validation:XValidation:rule="!(has(self.spread) && has(self.topologySpreadConstraints))",message="set pod.spread or pod.topologySpreadConstraints, not both"
type PodSpec struct {
	// Labels are added to the pods. The operator's own labels (app.kubernetes.io/name, instance and managed-by,
	// and any key under webapp.example.com/, such as a canary's canary-of) cannot be set here.
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k in ['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/managed-by'])",message="pod.labels must not set app.kubernetes.io/name, app.kubernetes.io/instance or app.kubernetes.io/managed-by: the operator sets them and selects pods by them"
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k.startsWith('webapp.example.com/'))",message="pod.labels must not set a key under webapp.example.com/ (canary-of, canary-revision): the operator's own labels, by which a canary's Deployment and Service select its pods"
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations are added to the pods. Keys under webapp.example.com/ (the config hash that rolls the pods when
	// their ConfigMaps or Secrets change) are the operator's and cannot be set here.
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k.startsWith('webapp.example.com/'))",message="pod.annotations must not set a key under webapp.example.com/ (config-hash): the operator's own, by which a change of the referenced ConfigMaps and Secrets rolls the pods"
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// ImagePullSecrets name Secrets in the WebApp's namespace with credentials for the image registry.
	// +listType=map
	// +listMapKey=name
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// Security is the Pod Security Standard the pods are made to meet. Restricted (the default) runs as non-root
	// with no privilege escalation, all capabilities dropped and the RuntimeDefault seccomp profile. Baseline is
	// the opt-out for images that must run as root (nginx:1.25, say): RuntimeDefault seccomp and no privilege
	// escalation, with the image's user and the default capabilities.
	// +kubebuilder:validation:Enum=Restricted;Baseline
	// +optional
	Security PodSecurity `json:"security,omitempty"`

	// ServiceAccountName is the ServiceAccount the pods run as (default: the namespace's default ServiceAccount).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// AutomountServiceAccountToken says whether the ServiceAccount's token is mounted into the pods (default: the
	// ServiceAccount's setting, true unless it says otherwise). Set it to false for an app that never calls the
	// Kubernetes API.
	// +optional
	AutomountServiceAccountToken *bool `json:"automountServiceAccountToken,omitempty"`

	// NodeSelector places the pods on nodes with all these labels.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations let the pods run on nodes with matching taints.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Affinity is the pods' node affinity and pod (anti-)affinity, as in a pod.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// Spread spreads the WebApp's pods evenly across nodes or zones (the simple form; a topology spread constraint
	// selecting the WebApp's pods of one revision). Not together with topologySpreadConstraints.
	// +optional
	Spread *Spread `json:"spread,omitempty"`

	// TopologySpreadConstraints are the pods' topology spread constraints as in a pod (the raw form: its
	// labelSelector must select the WebApp's pods, e.g. app.kubernetes.io/instance: NAME).
	// +listType=map
	// +listMapKey=topologyKey
	// +listMapKey=whenUnsatisfiable
	// +kubebuilder:validation:MaxItems=8
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// PriorityClassName is the pods' PriorityClass.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// TerminationGracePeriodSeconds is how long a stopping pod has, the drain included, before it is killed
	// (default 30).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// InitContainers run in order before the app starts; one with restartPolicy Always is a native sidecar that
	// keeps running beside the app. Their names must differ from each other and from "app".
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +optional
	InitContainers []ExtraContainer `json:"initContainers,omitempty"`
}

// PodSecurity names a Pod Security Standard level.
type PodSecurity string

const (
	// PodSecurityRestricted meets the restricted Pod Security Standard.
	PodSecurityRestricted PodSecurity = "Restricted"
	// PodSecurityBaseline meets the baseline Pod Security Standard, for images that must run as root.
	PodSecurityBaseline PodSecurity = "Baseline"
)

// RolloutSpec tunes the Deployment's rolling update.
type RolloutSpec struct {
	// MaxSurge is how many pods, or what percentage, may run above replicas during a rollout (default 25%).
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`

	// MaxUnavailable is how many pods, or what percentage, may be unavailable during a rollout (default 25%).
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// RevisionHistoryLimit is how many old ReplicaSets the Deployment keeps for rollback (default 10).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// ProgressDeadlineSeconds is how long a rollout may make no progress before the Deployment, and the WebApp's
	// Progressing and Ready conditions, report ProgressDeadlineExceeded (default 600).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	ProgressDeadlineSeconds int32 `json:"progressDeadlineSeconds,omitempty"`

	// Canary, when set, rolls each new version of the pods (a change of the pod template, or of a ConfigMap or
	// Secret it uses) out as a canary: the version that serves keeps its Deployment, the new one runs beside it in
	// <name>-canary, and its share of the traffic moves step by step. Through expose.gateway the HTTPRoute's backend
	// weights split the traffic exactly; without a Gateway (a Service only, or an Ingress) the split is by replicas
	// behind the one Service. The canary is rolled back at once when its pods show trouble, or when a check fails
	// more often than it may; status.canary says where the rollout is.
	// +optional
	Canary *CanarySpec `json:"canary,omitempty"`
}

// CanarySpec is a canary rollout's steps (or its blue/green switch) and the checks that gate them.
// +kubebuilder:validation:XValidation:rule="has(self.steps) != has(self.blueGreen)",message="a canary has steps or blueGreen, exactly one of them"
// +kubebuilder:validation:XValidation:rule="!has(self.keepPreviousWarm) || !self.keepPreviousWarm || has(self.rollbackWindowSeconds)",message="keepPreviousWarm keeps the version before warm for the rollback window: it needs rollbackWindowSeconds"
// +kubebuilder:validation:XValidation:rule="has(self.blueGreen) || !has(self.checks) || self.checks.all(c, !has(c.during))",message="checks[].during picks a blue/green's preview or keep: it needs blueGreen (with steps, every check gates every step)"
type CanarySpec struct {
	// Steps are the canary's shares of the traffic, in order; after the last one the new version is promoted (the
	// stable Deployment rolls to it) and the canary removed.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	Steps []CanaryStep `json:"steps,omitempty"`

	// BlueGreen, instead of steps, previews each new version and then switches all the traffic to it at once. The
	// new version runs in <name>-canary with as many pods as the stable one (or previewPercent of them), behind its
	// own Service (<name>-canary, and previewHost), with none of the production traffic, until its preview has
	// lasted previewSeconds with every check passing and its gate (if any) is promoted. Then (at full size, every
	// pod ready) the route sends it all the traffic at once, and the version before stays at full size for keepSeconds, the checks evaluated on the
	// production traffic meanwhile: an abort, a failed check or its pods' trouble switches the traffic back at
	// once. Then it is promoted: the stable Deployment rolls to it behind the route, the traffic moves back to the
	// stable Service (the same version on both sides), and the canary's pods go. Without expose.gateway (an Ingress,
	// or no exposure), the WebApp's Service is the switch: its selector moves from the stable pods to the new
	// version's at the switch, and back once the stable Deployment runs that version (previewHost needs a Gateway or an
	// Ingress).
	// +optional
	BlueGreen *BlueGreenSpec `json:"blueGreen,omitempty"`

	// Checks are queries each step must pass before the next one: all of them are evaluated every
	// checkIntervalSeconds while the canary serves its step, and once more when the step's pause is over (a
	// blue/green's check with during, only in its preview or its keep).
	// +kubebuilder:validation:MaxItems=5
	// +listType=map
	// +listMapKey=name
	// +optional
	Checks []CanaryCheck `json:"checks,omitempty"`

	// CheckIntervalSeconds is how often the checks are evaluated while a step runs (default 10).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	CheckIntervalSeconds int32 `json:"checkIntervalSeconds,omitempty"`

	// RollbackWindowSeconds keeps the version a promotion replaced known for that long: setting the spec back to it
	// meanwhile (as reverting a commit does) rolls the stable Deployment straight back to it, without a canary's
	// steps, pauses, gates or checks (status.canary.previousRevision and previousUntil say which, and until when).
	// Unset: a change back is a new version like any other, tried by a canary.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2592000
	// +optional
	RollbackWindowSeconds int32 `json:"rollbackWindowSeconds,omitempty"`

	// RetireSeconds is how long a canary's pods stay after the route (or a blue/green's Service switch) sent them
	// their last traffic, answering the requests already on their way, before they go: after a promotion, a
	// rollback, an abort or a spec that leaves them, counted from the write that took the traffic off them. Unset:
	// 10. A gateway or load balancer slower to follow its route (a cloud load balancer deregistering its targets,
	// say) needs more; Argo Rollouts calls it scaleDownDelaySeconds (30 by default). Counted to the second (the
	// status keeps whole seconds), hence 2 at least. Steps without a Gateway retire nothing: their pods leave the one
	// Service as any pod going does. A strategy taken out still retires its pods that long (status.canary keeps it).
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=3600
	// +optional
	RetireSeconds int32 `json:"retireSeconds,omitempty"`

	// KeepPreviousWarm keeps the version a promotion replaced running, at the stable version's count and with none
	// of the traffic, in <name>-canary for rollbackWindowSeconds after the promotion (a cost the user chooses: twice
	// the pods meanwhile). Setting the spec back to it within the window, once its pods are ready, sends it all the
	// traffic at once, through the route; the stable Deployment then rolls back to it behind the route, and the
	// traffic moves back to the stable Service. Before its pods are ready, the way back is the rollback window's
	// alone. Through expose.gateway, or with blueGreen without one (the Service's selector then switches to the kept
	// pods, as at a blue/green's switch); steps without a Gateway split by replicas, which would send the kept pods
	// their share.
	// +optional
	KeepPreviousWarm bool `json:"keepPreviousWarm,omitempty"`
}

// BlueGreenSpec is a blue/green rollout: the new version previewed (at full size, or previewPercent of it), then, at
// full size, all the traffic switched to it at once, with the version before kept for a while to switch back to.
type BlueGreenSpec struct {
	// PreviewSeconds is how long the preview lasts once every pod of the new version is ready, its checks
	// evaluated meanwhile (0: the switch comes as soon as they are ready and the checks pass).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	// +optional
	PreviewSeconds int32 `json:"previewSeconds,omitempty"`

	// PreviewPercent is the size of the preview, in percent of the stable version's count (at least one pod):
	// before the switch the new version is scaled to the stable count, and the traffic switches only once every one
	// of its pods is ready. Unset: 100, the preview at full size (Argo Rollouts' previewReplicaCount, as a share,
	// so that it follows an autoscaled count).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	PreviewPercent int32 `json:"previewPercent,omitempty"`

	// Gate makes the switch wait, after the preview, for a person to promote it (kubectl webapp promote, or the
	// annotation webapp.example.com/action: "promote <canaryRevision>/0"); with timeoutSeconds the wait ends on
	// its own, as onTimeout says.
	// +optional
	Gate *CanaryGate `json:"gate,omitempty"`

	// KeepSeconds is how long the version before is kept at full size after the switch (counted from when the
	// route sends the new version all the traffic), ready to take it back at once (0: until the checks pass once
	// on the production traffic).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	// +optional
	KeepSeconds int32 `json:"keepSeconds,omitempty"`

	// PreviewHost is a host whose requests go to the new version alone while it runs, from the preview until the
	// promotion is complete (it is gone after a rollback): a second HTTPRoute on expose's Gateway and paths (whose
	// listener must accept the host), or behind an Ingress a second Ingress of its class and paths (with expose's TLS
	// Secret, if any, which must then hold a certificate for the host too). Either is named <name>-canary, as the
	// canary's Deployment and Service. Only with expose.gateway or expose.ingress.
	// +optional
	PreviewHost Hostname `json:"previewHost,omitempty"`
}

// PreviewSize is the preview's size in percent of the stable version's count: previewPercent, or 100.
func (b *BlueGreenSpec) PreviewSize() int32 {
	if b == nil || b.PreviewPercent <= 0 {
		return 100
	}
	return b.PreviewPercent
}

// EffectiveSteps are the steps the canary takes: its steps, or a blue/green's two (the preview: weight 0, its
// pause and gate; the switch: weight 100, paused keepSeconds). A blue/green's preview runs at full size (or
// previewPercent of it), which no step of the API can ask for; weight 100 is not one the API accepts in a step.
func (c *CanarySpec) EffectiveSteps() []CanaryStep {
	if c == nil {
		return nil
	}
	if bg := c.BlueGreen; bg != nil {
		return []CanaryStep{{PauseSeconds: bg.PreviewSeconds, Gate: bg.Gate}, {Weight: 100, PauseSeconds: bg.KeepSeconds}}
	}
	return c.Steps
}

// CanaryStep sends weight percent of the traffic to the canary, then pauses once the canary serves it.
// +kubebuilder:validation:XValidation:rule="self.weight > 0 || has(self.matches) || has(self.mirrorPercent)",message="a step with weight 0 sends the canary only the requests of its matches or mirrorPercent: set one of them, or a weight"
type CanaryStep struct {
	// Weight is the canary's share of the traffic, in percent (0: only the requests that meet matches, and the
	// mirrored ones).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=99
	Weight int32 `json:"weight"`

	// Matches send every request that meets one of them to the canary, whatever the weight (A/B testing: a
	// header such as X-Canary: always, or a cookie), from the moment the canary serves this step until the next
	// step's: they are the operator's own rules in the WebApp's HTTPRoute, beside expose's, and are gone with the
	// step (and after a promotion or a rollback). Through expose.gateway only.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	// +listType=atomic
	// +optional
	Matches []CanaryMatch `json:"matches,omitempty"`

	// MirrorPercent copies this share of the requests expose's rule serves to the canary as well; the copies'
	// answers are dropped, so the canary meets real requests that no client waits for. Through expose.gateway
	// only (the Gateway API's RequestMirror filter).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MirrorPercent int32 `json:"mirrorPercent,omitempty"`

	// PauseSeconds is how long the step lasts once the canary serves its weight (0: it passes as soon as the
	// canary is ready and the checks pass).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	// +optional
	PauseSeconds int32 `json:"pauseSeconds,omitempty"`

	// Gate makes the step wait, once its pause is over and its checks pass, for a person to promote it (kubectl
	// webapp promote, or the annotation webapp.example.com/action: "promote <canaryRevision>/<step>").
	// status.canary.gateSince says since when. With timeoutSeconds the wait ends on its own, as onTimeout says.
	// +optional
	Gate *CanaryGate `json:"gate,omitempty"`
}

// CanaryMatch is what a request must carry, all of it, to go to the canary.
// +kubebuilder:validation:XValidation:rule="has(self.headers) || has(self.cookie)",message="a match needs headers or a cookie"
// +kubebuilder:validation:XValidation:rule="!has(self.cookie) || !has(self.headers) || !self.headers.exists(h, h.name.lowerAscii() == 'cookie')",message="a match with a cookie matches the Cookie header: it cannot match a header named Cookie too"
type CanaryMatch struct {
	// Headers must each be present with their value (header names are case-insensitive).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, a.name.lowerAscii() == b.name.lowerAscii()))",message="a match names a header once (header names are case-insensitive)"
	// +listType=map
	// +listMapKey=name
	// +optional
	Headers []CanaryHeaderMatch `json:"headers,omitempty"`

	// Cookie must be sent with its value (in the Cookie header, among others).
	// +optional
	Cookie *CanaryCookieMatch `json:"cookie,omitempty"`
}

// CanaryHeaderMatch is a request header and its value.
// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type != 'RegularExpression' || (\"\".matches(self.value) ? true : true)",message="a header's value of type RegularExpression must be a regular expression (RE2 syntax)"
type CanaryHeaderMatch struct {
	// Name is the header's name, e.g. X-Canary.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+\-.^_\x60|~]+$`
	Name string `json:"name"`

	// Value is the value the header must have (Exact), or a regular expression (RE2 syntax) for it
	// (RegularExpression): some gateways match it against the whole value, others anywhere in it (Traefik), so
	// anchor it with ^ and $ to mean the same on every one. Printable ASCII, single spaces or tabs between words
	// (the Gateway API's own rule for a header's value).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[!-~]+([\t ]?[!-~]+)*$`
	Value string `json:"value"`

	// Type is Exact (the default) or RegularExpression.
	// +kubebuilder:validation:Enum=Exact;RegularExpression
	// +optional
	Type HeaderMatchType `json:"type,omitempty"`
}

// HeaderMatchType is how a header's value is matched.
type HeaderMatchType string

const (
	// HeaderExact matches a header's value exactly.
	HeaderExact HeaderMatchType = "Exact"
	// HeaderRegularExpression matches a header's whole value against a regular expression.
	HeaderRegularExpression HeaderMatchType = "RegularExpression"
)

// CanaryCookieMatch is a cookie and its value.
type CanaryCookieMatch struct {
	// Name is the cookie's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+\-.^_\x60|~]+$`
	Name string `json:"name"`

	// Value is the cookie's value, exactly.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[!#-+\--:<-\[\]-~]+$`
	Value string `json:"value"`
}

// CanaryGate is a step's wait for a person.
// +kubebuilder:validation:XValidation:rule="!has(self.onTimeout) || has(self.timeoutSeconds)",message="gate.onTimeout says what gate.timeoutSeconds does, and is set with it only"
type CanaryGate struct {
	// TimeoutSeconds is how long the gate waits (unset: until a person promotes or aborts).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=604800
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`

	// OnTimeout is what the timeout does: RollBack (the default) or Promote (the step passes).
	// +kubebuilder:validation:Enum=RollBack;Promote
	// +optional
	OnTimeout GateTimeout `json:"onTimeout,omitempty"`
}

// GateTimeout is what a gate's timeout does.
type GateTimeout string

const (
	// GateRollBack makes a gate's timeout roll the canary back (the default).
	GateRollBack GateTimeout = "RollBack"
	// GatePromote makes a gate's timeout pass the step.
	GatePromote GateTimeout = "Promote"
)

// CanaryCheck is a measurement of the canary whose value must not exceed max: a Prometheus query's, or a webhook's.
// +kubebuilder:validation:XValidation:rule="!has(self.noDataWaitSeconds) || (has(self.onNoData) && self.onNoData == 'Wait')",message="noDataWaitSeconds bounds onNoData: Wait, and is set with it only"
// +kubebuilder:validation:XValidation:rule="has(self.prometheus) != has(self.webhook)",message="a check has exactly one of prometheus or webhook"
type CanaryCheck struct {
	// Name names the check in the status and events.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Prometheus is the value's source: an instant PromQL query.
	// +optional
	Prometheus *PrometheusQuery `json:"prometheus,omitempty"`

	// Webhook is the value's source: an HTTP POST whose JSON answer carries it (see WebhookCheck).
	// +optional
	Webhook *WebhookCheck `json:"webhook,omitempty"`

	// Max is the greatest value that passes, a decimal number such as 0.01. A query with no value is what
	// onNoData says.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?$`
	Max string `json:"max"`

	// OnNoData says what a query that gives no value counts as (no series, or NaN, as a ratio of a quiet service's
	// requests gives): Fail (the default: a check never passes on missing data unless told), Pass (said so in the
	// status's evaluation, never silently), or Wait: the step holds, counting no failure, until a value comes or
	// noDataWaitSeconds have passed, after which no value fails. An error (the server unreachable, an answer that is
	// not a number) always fails.
	// +kubebuilder:validation:Enum=Fail;Pass;Wait
	// +optional
	OnNoData CheckNoData `json:"onNoData,omitempty"`

	// NoDataWaitSeconds bounds onNoData: Wait: how long a check may give no value before that fails (default 300).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	NoDataWaitSeconds int32 `json:"noDataWaitSeconds,omitempty"`

	// FailuresAllowed is how many failed evaluations one canary may have before it is rolled back (default 0: the
	// first failure rolls it back).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	FailuresAllowed int32 `json:"failuresAllowed,omitempty"`

	// During limits a blue/green's check to its preview (Preview: before the switch, on the preview's requests, as
	// Argo Rollouts' prePromotionAnalysis; a smoke test's webhook, say) or to its keep (Keep: after the switch, on
	// the production traffic, as its postPromotionAnalysis). Unset: it gates both. The check is neither queried nor
	// counted outside its part; its last evaluation stays in the status. Only with blueGreen: with steps, every check
	// gates every step.
	// +kubebuilder:validation:Enum=Preview;Keep
	// +optional
	During CheckDuring `json:"during,omitempty"`
}

// CheckDuring is the part of a blue/green a check gates.
type CheckDuring string

const (
	// DuringPreview makes the check gate the preview, before the switch.
	DuringPreview CheckDuring = "Preview"
	// DuringKeep makes the check gate the keep, after the switch.
	DuringKeep CheckDuring = "Keep"
)

// CheckNoData is what a check's query that gives no value counts as.
type CheckNoData string

const (
	// NoDataFail makes no value a failure (the default).
	NoDataFail CheckNoData = "Fail"
	// NoDataPass makes no value pass.
	NoDataPass CheckNoData = "Pass"
	// NoDataWait makes no value hold the step, for noDataWaitSeconds at most; then it is a failure.
	NoDataWait CheckNoData = "Wait"
)

// WebhookCheck is an HTTP endpoint that measures the canary. Each round, the operator POSTs it a JSON CheckRequest:
//
//	{"apiVersion": "webapp.example.com/v1", "kind": "CheckRequest", "namespace": "shop", "webApp": "web",
//	 "check": "errors", "canaryRevision": "...", "stableRevision": "...", "step": 0, "weight": 10,
//	 "time": "2026-12-07T04:00:00Z"}
//
// and reads, from a 2xx answer of at most 64 KiB, {"value": 0.003}: the value, held against max, or {"value": null}
// (or no value field): no value, which is what onNoData says. Any other answer (another status, not that JSON, a
// value that is not a number) fails the check, as does no answer within the timeout.
type WebhookCheck struct {
	// URL is the endpoint, http or https.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	URL string `json:"url"`

	// TimeoutSeconds bounds the call (default 5, and at most 5: a round of checks is bounded at 5 s).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`

	// Headers are sent with each call: a token in Authorization, a tenant's id. A value from a Secret is read when
	// each round starts and never written anywhere (status, events or logs name the Secret and key, not the value).
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(a, self.exists_one(b, a.name.lowerAscii() == b.name.lowerAscii()))",message="a webhook names a header once (header names are case-insensitive)"
	// +listType=map
	// +listMapKey=name
	// +optional
	Headers []WebhookHeader `json:"headers,omitempty"`
}

// WebhookHeader is a header of a webhook check's call, with its value or a Secret's key that holds it.
// +kubebuilder:validation:XValidation:rule="has(self.value) != has(self.secretKeyRef)",message="a webhook header has exactly one of value or secretKeyRef"
// +kubebuilder:validation:XValidation:rule="!(self.name.lowerAscii() in ['host', 'content-type', 'content-length', 'transfer-encoding', 'connection', 'accept'])",message="a webhook header cannot be Host, Content-Type, Content-Length, Transfer-Encoding, Connection or Accept: the operator sets them"
type WebhookHeader struct {
	// Name is the header's name, e.g. Authorization.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+\-.^_\x60|~]+$`
	Name string `json:"name"`

	// Value is the header's value, written in the spec (not for credentials: use secretKeyRef).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^[\x20-\x7e]+$`
	// +optional
	Value string `json:"value,omitempty"`

	// SecretKeyRef names a key of a Secret in the WebApp's namespace whose data is the header's value, e.g.
	// "Bearer <token>".
	// +optional
	SecretKeyRef *SecretKeyRef `json:"secretKeyRef,omitempty"`
}

// SecretKeyRef is a key of a Secret in the WebApp's namespace.
type SecretKeyRef struct {
	// Name is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Key is the key of the Secret's data.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// PrometheusQuery is a PromQL query on a Prometheus server.
type PrometheusQuery struct {
	// Address is the Prometheus server's base URL, e.g. http://prometheus.monitoring:9090.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	Address string `json:"address"`

	// Query is an instant PromQL query whose result is a scalar or a single series, e.g. the canary's ratio of
	// 5xx answers.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Query string `json:"query"`
}

// ServiceSpec configures the WebApp's Service.
type ServiceSpec struct {
	// Type is ClusterIP (the default), NodePort or LoadBalancer.
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`

	// Annotations are added to the Service (a cloud load balancer's settings, say). kubectl's
	// last-applied-configuration annotation is refused: it is kubectl's record of a client-side apply, not a setting.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="!('kubectl.kubernetes.io/last-applied-configuration' in self)",message="service.annotations must not set kubectl.kubernetes.io/last-applied-configuration: it is kubectl's own record of a client-side apply"
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// WebAppStatus is what the operator observed at its last reconcile. It is the same in every version.
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

	// URL is where the app is: with spec.expose its first host and path (https with expose.tls), e.g.
	// https://shop.example.com/; otherwise the in-cluster address of the Service's primary port, e.g.
	// http://nginx-app.default.svc:80.
	// +optional
	URL string `json:"url,omitempty"`

	// URLs are every host and path spec.expose routes, in its order.
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
// +kubebuilder:storageversion
// +kubebuilder:resource:path=webapps,scope=Namespaced,shortName=wa,categories=all
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredReplicas`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label (at most 63 lowercase letters, digits or '-', starting with a letter and ending with a letter or digit) because it also names the Service",fieldPath=.metadata
// +kubebuilder:validation:XValidation:rule="!has(self.spec.rollout) || !has(self.spec.rollout.canary) || size(self.metadata.name) <= 56",message="with spec.rollout.canary, metadata.name must be at most 56 characters: the canary's Service is named <name>-canary",fieldPath=.metadata
// +kubebuilder:validation:XValidation:rule="!has(self.spec.rollout) || !has(self.spec.rollout.canary) || !has(oldSelf.spec.rollout) || !has(oldSelf.spec.rollout.canary) || (has(self.spec.ports) == has(oldSelf.spec.ports) && (!has(self.spec.ports) || self.spec.ports == oldSelf.spec.ports))",message="spec.ports cannot change while spec.rollout.canary is set: the stable version's Service keeps serving its ports during a canary; remove the strategy, change the ports, then set it again"
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
