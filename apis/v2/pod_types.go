package v2

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// This file has what the pod of a real app needs beyond one container and its ports: volumes and where they are
// mounted, a claim the WebApp owns, more containers (init containers and native sidecars) and the simple form of
// a topology spread. Every field here is optional, and each one left unset adds nothing to the pod template: an
// operator upgrade rolls no existing pod.

// ReservedVolumePrefix starts the names of the volumes the operator adds itself (the emptyDirs of
// container.writablePaths); a WebApp's own volume names cannot start with it.
const ReservedVolumePrefix = "webapp-"

// DefaultTerminationGracePeriodSeconds is the Kubernetes default a pod's drain period must stay below when
// pod.terminationGracePeriodSeconds is unset.
const DefaultTerminationGracePeriodSeconds = 30

// Volume is one volume of the pods, from exactly one source.
// +kubebuilder:validation:XValidation:rule="[has(self.configMap), has(self.secret), has(self.emptyDir), has(self.persistentVolumeClaim), has(self.claim)].filter(x, x).size() == 1",message="a volume needs exactly one of configMap, secret, emptyDir, persistentVolumeClaim or claim (other volume sources, hostPath among them, are not supported)"
type Volume struct {
	// Name names the volume in the pod; mounts refer to it. A DNS label, not starting with "webapp-" (the
	// operator's own volumes).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('webapp-')",message="a volume name must not start with 'webapp-': the operator names its own volumes so"
	// +required
	Name string `json:"name"`

	// ConfigMap mounts the keys of a ConfigMap in the WebApp's namespace as files. A change of the ConfigMap rolls
	// the pods.
	// +optional
	ConfigMap *ConfigMapVolume `json:"configMap,omitempty"`

	// Secret mounts the keys of a Secret in the WebApp's namespace as files. A change of the Secret rolls the pods.
	// +optional
	Secret *SecretVolume `json:"secret,omitempty"`

	// EmptyDir is a directory that lives as long as the pod: on the node's disk, or in memory (tmpfs).
	// +optional
	EmptyDir *EmptyDirVolume `json:"emptyDir,omitempty"`

	// PersistentVolumeClaim mounts an existing claim in the WebApp's namespace (one the WebApp does not own).
	// +optional
	PersistentVolumeClaim *ClaimReference `json:"persistentVolumeClaim,omitempty"`

	// Claim is a PersistentVolumeClaim the WebApp owns, named after the WebApp (at most one per WebApp). It is
	// created with the WebApp and kept when the WebApp is deleted unless its deletionPolicy is Delete; removing
	// the volume from the spec releases the claim, never deletes it.
	// +optional
	Claim *OwnedClaim `json:"claim,omitempty"`
}

// KeyToPath puts one key of a ConfigMap or Secret at a relative path of the volume.
type KeyToPath struct {
	// Key is the ConfigMap's or Secret's key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +required
	Key string `json:"key"`

	// Path is the file's path in the volume: relative, without '..' segments.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')",message="a key's path must be relative and must not contain '..' segments"
	// +required
	Path string `json:"path"`

	// Mode is the file's mode bits, 0 to 0777 (given in decimal in JSON: 420 is 0644). Unset: the volume's
	// defaultMode.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=511
	// +optional
	Mode *int32 `json:"mode,omitempty"`
}

// ConfigMapVolume mounts a ConfigMap.
type ConfigMapVolume struct {
	// Name is the ConfigMap's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Name string `json:"name"`

	// Items choose the keys to mount and their paths (default: every key, at a file of its name).
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Items []KeyToPath `json:"items,omitempty"`

	// DefaultMode is the files' mode bits, 0 to 0777 (default 0644).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=511
	// +optional
	DefaultMode *int32 `json:"defaultMode,omitempty"`

	// Optional lets the pods start while the ConfigMap (or a chosen key) is missing. Unset or false: a missing
	// ConfigMap keeps the pods from starting, and the WebApp's Ready condition says so.
	// +optional
	Optional *bool `json:"optional,omitempty"`
}

// SecretVolume mounts a Secret.
type SecretVolume struct {
	// Name is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Name string `json:"name"`

	// Items choose the keys to mount and their paths (default: every key, at a file of its name).
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Items []KeyToPath `json:"items,omitempty"`

	// DefaultMode is the files' mode bits, 0 to 0777 (default 0644).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=511
	// +optional
	DefaultMode *int32 `json:"defaultMode,omitempty"`

	// Optional lets the pods start while the Secret (or a chosen key) is missing.
	// +optional
	Optional *bool `json:"optional,omitempty"`
}

// EmptyDirVolume is a scratch directory of the pod.
type EmptyDirVolume struct {
	// Medium is "" (the node's disk, the default) or Memory (tmpfs, counted against the container's memory).
	// +kubebuilder:validation:Enum="";Memory
	// +optional
	Medium corev1.StorageMedium `json:"medium,omitempty"`

	// SizeLimit is the most the directory may hold, e.g. 64Mi; the pod is evicted above it.
	// +optional
	SizeLimit *StorageSize `json:"sizeLimit,omitempty"`
}

// ClaimReference names an existing PersistentVolumeClaim.
type ClaimReference struct {
	// ClaimName is the claim's name, in the WebApp's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	ClaimName string `json:"claimName"`

	// ReadOnly mounts the claim read-only in every container.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
}

// ClaimDeletionPolicy says what happens to an owned claim when its WebApp is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type ClaimDeletionPolicy string

const (
	// ClaimRetain keeps the claim, and its data, when the WebApp is deleted (the default): the operator releases it
	// first (it then has no owner).
	ClaimRetain ClaimDeletionPolicy = "Retain"
	// ClaimDelete deletes the claim with the WebApp (garbage collection, through its owner reference).
	ClaimDelete ClaimDeletionPolicy = "Delete"
)

// OwnedClaim is a PersistentVolumeClaim the WebApp owns. Its storage class and access mode cannot change once set
// (a claim's are immutable), and its size can only grow (where the storage class allows expansion). These rules
// are on WebAppSpec, over the claim volume whatever its name: the claim is named after the WebApp, so a renamed
// volume still mounts the same claim.
type OwnedClaim struct {
	// Size is the storage the claim requests, e.g. 1Gi.
	// +required
	Size StorageSize `json:"size"`

	// StorageClassName is the claim's StorageClass. Unset: the cluster's default class; "": no class (a statically
	// provisioned volume).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$`
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// AccessMode is the claim's access mode (default ReadWriteOnce). A ReadWriteOnce or ReadWriteOncePod claim is
	// mounted by one pod at a time: the WebApp then runs one replica and rolls out by Recreate (the old pod stops
	// before the new one starts).
	// +kubebuilder:validation:Enum=ReadWriteOnce;ReadWriteOncePod;ReadWriteMany;ReadOnlyMany
	// +kubebuilder:default=ReadWriteOnce
	// +optional
	AccessMode corev1.PersistentVolumeAccessMode `json:"accessMode,omitempty"`

	// DeletionPolicy is Retain (the default: the claim and its data stay when the WebApp is deleted) or Delete.
	// +kubebuilder:default=Retain
	// +optional
	DeletionPolicy ClaimDeletionPolicy `json:"deletionPolicy,omitempty"`
}

// SingleWriter says whether the claim can be mounted by one pod (or node) at a time only.
func (c *OwnedClaim) SingleWriter() bool {
	return c != nil && (c.AccessMode == "" || c.AccessMode == corev1.ReadWriteOnce || c.AccessMode == corev1.ReadWriteOncePod)
}

// StorageSize is an amount of storage in bytes, as a quantity written as a string: a number with an optional
// binary (Ki, Mi, Gi, Ti, Pi, Ei) or decimal (k, M, G, T, P, E) suffix or exponent, more than zero, e.g. 512Mi, 10G.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=32
// +kubebuilder:validation:Pattern=`^([0-9]+([.][0-9]*)?|[.][0-9]+)([KMGTPE]i|[kMGTPE]|[eE][0-9]+)?$`
// +kubebuilder:validation:XValidation:rule="quantity(self).isGreaterThan(quantity('0'))",message="a size must be more than zero"
type StorageSize string

// Quantity is the size as a quantity (zero for one the schema would refuse).
func (s StorageSize) Quantity() resource.Quantity {
	q, err := resource.ParseQuantity(string(s))
	if err != nil {
		return resource.Quantity{}
	}
	return q
}

// VolumeMount mounts a volume of spec.volumes into a container.
type VolumeMount struct {
	// Name is the volume's name in spec.volumes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`

	// MountPath is the absolute path in the container, without ':' or '..' segments, and clean (no trailing '/',
	// no '//', no '.' segment), so that one directory is one string: /data and /data/ would be two mounts at one path.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/[^:]*$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.](/|$)')",message="a mountPath must not contain '..' segments"
	// +kubebuilder:validation:XValidation:rule="self == '/' || (!self.endsWith('/') && !self.contains('//') && !self.contains('/./') && !self.endsWith('/.'))",message="a mountPath must be a clean absolute path (no trailing '/', no '//', no '.' segment; e.g. /data, not /data/, //data or /data/.): two spellings of one directory would be two mounts at one path"
	// +required
	MountPath string `json:"mountPath"`

	// SubPath mounts one file or directory of the volume instead of its root: a relative path, without '..'
	// segments. A ConfigMap or Secret mounted by subPath is not updated in place, but its change still rolls the
	// pods.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)[.][.](/|$)')",message="a subPath must be relative and must not contain '..' segments"
	// +optional
	SubPath string `json:"subPath,omitempty"`

	// ReadOnly mounts the volume read-only.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
}

// ExtraContainer is an init container, or with restartPolicy Always a native sidecar (it starts before the app
// and keeps running beside it). It runs under the pods' Pod Security Standard, as the app does.
// +kubebuilder:validation:XValidation:rule="!has(self.readinessProbe) || (has(self.restartPolicy) && self.restartPolicy == 'Always')",message="only a sidecar (restartPolicy: Always) can have a readinessProbe"
type ExtraContainer struct {
	// Name names the container: a DNS label, not "app" (the app's own container).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self != 'app'",message="'app' is the app container's name"
	// +required
	Name string `json:"name"`

	// Image is the container's image. Required, with no whitespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^\S+$`
	// +required
	Image string `json:"image"`

	// Command overrides the image's entrypoint.
	// +listType=atomic
	// +optional
	Command []string `json:"command,omitempty"`

	// Args overrides the image's arguments.
	// +listType=atomic
	// +optional
	Args []string `json:"args,omitempty"`

	// Env sets environment variables, as container.env does (a referenced ConfigMap's or Secret's change rolls the
	// pods).
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// Resources are the container's requests and limits.
	// +kubebuilder:validation:XValidation:rule="!has(self.claims)",message="resources.claims is not supported: the WebApp's pods have no resource claims"
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty,omitzero"`

	// VolumeMounts mount volumes of spec.volumes into this container.
	// +listType=map
	// +listMapKey=mountPath
	// +kubebuilder:validation:MaxItems=16
	// +optional
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`

	// ImagePullPolicy is Always, IfNotPresent or Never.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// RestartPolicy Always makes the container a native sidecar: started in order with the init containers, kept
	// running beside the app, stopped after it. Unset: an init container that must finish before the next starts.
	// +kubebuilder:validation:Enum=Always
	// +optional
	RestartPolicy corev1.ContainerRestartPolicy `json:"restartPolicy,omitempty"`

	// ReadinessProbe of a sidecar: the pod is ready only while it passes.
	// +optional
	ReadinessProbe *corev1.Probe `json:"readinessProbe,omitempty"`
}

// Spread is the simple form of a topology spread: the WebApp's pods spread evenly across nodes or zones.
type Spread struct {
	// Across is Nodes (the label kubernetes.io/hostname) or Zones (topology.kubernetes.io/zone).
	// +kubebuilder:validation:Enum=Nodes;Zones
	// +required
	Across SpreadAcross `json:"across"`

	// MaxSkew is how many more pods one node or zone may have than another (default 1).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxSkew int32 `json:"maxSkew,omitempty"`

	// Required refuses to schedule a pod that would break the spread (DoNotSchedule); unset or false, the scheduler
	// prefers the spread but places the pod anyway (ScheduleAnyway).
	// +optional
	Required bool `json:"required,omitempty"`
}

// SpreadAcross names the topology a spread is across.
type SpreadAcross string

const (
	// SpreadNodes spreads across nodes.
	SpreadNodes SpreadAcross = "Nodes"
	// SpreadZones spreads across zones.
	SpreadZones SpreadAcross = "Zones"
)
