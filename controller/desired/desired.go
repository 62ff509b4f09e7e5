// Package desired is the desired state of every child of a WebApp: pure builders from the WebApp and what a
// reconcile observed (Inputs) to the complete apply configuration of each child (the Deployment and its pod, the
// Service, the HPA, the PodDisruptionBudget, the Ingress or HTTPRoute, the claim, the canary's Deployment and
// Service). Every field we own is set on every call, so a field left out is one we hand over. It does no I/O: the
// lint config refuses a client, cache, HTTP or file import here; the reconciler (controller/) reads and writes.
package desired

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/utils/ptr"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
)

const (
	// containerName names the single container.
	containerName = "app"

	// ownerAPIVersion is the version our owner references name. It stays example.com/v1 although the operator reads
	// v2: the garbage collector finds the owner through any served version, and a reference that changed version
	// would mean a write to every child of every WebApp when the operator is upgraded.
	ownerAPIVersion = "example.com/v1"
)

// SelectorLabels select the pods of one WebApp. Both labels are used, so pods of another tool that only share
// the instance label (a Helm release of the same name, say) are never selected.
func SelectorLabels(app *webappv2.WebApp) map[string]string {
	return map[string]string{webappv2.LabelName: webappv2.AppName, webappv2.LabelInstance: app.Name}
}

// CommonLabels go on the Deployment, its pod template and the Service.
func CommonLabels(app *webappv2.WebApp) map[string]string {
	l := SelectorLabels(app)
	l[webappv2.LabelManagedBy] = webappv2.ManagedBy
	return l
}

// OwnerReference makes the WebApp the controller of a child, so garbage collection deletes the child with it.
func OwnerReference(app *webappv2.WebApp) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(ownerAPIVersion).
		WithKind("WebApp").
		WithName(app.Name).
		WithUID(app.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// Deployment is the complete Deployment we mean to own for app. Every field we own is set on every call:
// a field left out of an apply is released by our manager and may be reset by the server. Of the inputs it takes
// the config hash of the referenced configuration ("" when the WebApp refers to none) and whether the WebApp's
// HorizontalPodAutoscaler exists.
func Deployment(app *webappv2.WebApp, in Inputs) (*appsv1ac.DeploymentApplyConfiguration, error) {
	template, err := PodTemplate(app, in.ConfigHash)
	if err != nil {
		return nil, err
	}
	spec := appsv1ac.DeploymentSpec().
		WithProgressDeadlineSeconds(progressDeadline(app)).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(app))).
		WithTemplate(template)
	// Once the HorizontalPodAutoscaler exists the count is its: it is left out, so the HPA's writes through /scale
	// own it (handOverReplicas makes sure it is never reset on the way). Until then it is the WebApp's, so a count
	// never passes to an HPA the API refused; and a Deployment created (again) gets the WebApp's count in the HPA's
	// range, never the API's default of 1, and hands it over on the next reconcile.
	if !ReplicasByHPA(app, in.HPAExists) || in.DeploymentMissing {
		spec.WithReplicas(WebAppReplicas(app))
	}
	if app.Spec.Rollout.RevisionHistoryLimit != nil {
		spec.WithRevisionHistoryLimit(*app.Spec.Rollout.RevisionHistoryLimit)
	}
	switch s := app.Spec.Rollout; {
	case Recreates(app):
		// The one pod that may mount the claim stops before the new one starts (the CRD allows no surge here).
		spec.WithStrategy(appsv1ac.DeploymentStrategy().WithType(appsv1.RecreateDeploymentStrategyType))
	case s.MaxSurge != nil || s.MaxUnavailable != nil:
		ru := appsv1ac.RollingUpdateDeployment()
		if s.MaxSurge != nil {
			ru.WithMaxSurge(*s.MaxSurge)
		}
		if s.MaxUnavailable != nil {
			ru.WithMaxUnavailable(*s.MaxUnavailable)
		}
		spec.WithStrategy(appsv1ac.DeploymentStrategy().WithType(appsv1.RollingUpdateDeploymentStrategyType).WithRollingUpdate(ru))
	}
	return appsv1ac.Deployment(app.Name, app.Namespace).
		WithLabels(CommonLabels(app)).
		WithOwnerReferences(OwnerReference(app)).
		WithSpec(spec), nil
}

// PodTemplate is the pod template: the user's pod labels and annotations under ours, one container, the
// pull secrets, and the security context of the chosen Pod Security Standard.
func PodTemplate(app *webappv2.WebApp, configHash string) (*corev1ac.PodTemplateSpecApplyConfiguration, error) {
	labels := maps.Clone(app.Spec.Pod.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, CommonLabels(app))
	annotations := maps.Clone(app.Spec.Pod.Annotations)
	if configHash != "" {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[webappv2.ConfigHashAnnotation] = configHash
	}
	container, err := desiredContainer(app)
	if err != nil {
		return nil, err
	}
	inits, initErr := desiredInitContainers(app)
	pod := corev1ac.PodSpec().
		WithInitContainers(inits...).
		WithContainers(container).
		WithVolumes(desiredVolumes(app)...).
		WithSecurityContext(podSecurityContext(app))
	for _, s := range app.Spec.Pod.ImagePullSecrets {
		pod.WithImagePullSecrets(corev1ac.LocalObjectReference().WithName(s.Name))
	}
	if err := errors.Join(initErr, podPlacement(app, pod)); err != nil {
		return nil, err
	}
	t := corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(pod)
	if len(annotations) > 0 {
		t.WithAnnotations(annotations)
	}
	return t, nil
}

// desiredContainer is the one container, named app, with the WebApp's named ports. The user's env, envFrom,
// resources and probes are the API's own types, converted to apply configurations as they are.
func desiredContainer(app *webappv2.WebApp) (*corev1ac.ContainerApplyConfiguration, error) {
	spec := app.Spec.Container
	c := corev1ac.Container().
		WithName(containerName).
		WithImage(app.Spec.Image).
		WithSecurityContext(appSecurityContext(app))
	for _, p := range ports(app) {
		// The protocol is part of the list key the server records; leaving it to defaulting would make our
		// owned fields differ from what we send, and cost a write per reconcile.
		c.WithPorts(corev1ac.ContainerPort().WithName(p.Name).WithContainerPort(p.Port).WithProtocol(corev1.ProtocolTCP))
	}
	withProcess(c, spec.Command, spec.Args, spec.ImagePullPolicy)
	c.WithVolumeMounts(volumeMounts(spec.VolumeMounts, spec.WritablePaths)...)
	if l := drain(app); l != nil {
		c.WithLifecycle(l)
	}
	var errs []error
	for i := range spec.Env {
		env := ServerFormEnv(spec.Env[i])
		errs = append(errs, convert(&env, func(ac *corev1ac.EnvVarApplyConfiguration) { c.WithEnv(ac) }))
	}
	for i := range spec.EnvFrom {
		errs = append(errs, convert(&spec.EnvFrom[i], func(ac *corev1ac.EnvFromSourceApplyConfiguration) { c.WithEnvFrom(ac) }))
	}
	if r := spec.Resources; len(r.Requests) > 0 || len(r.Limits) > 0 || len(r.Claims) > 0 {
		r = ServerFormResources(r)
		errs = append(errs, convert(&r, func(ac *corev1ac.ResourceRequirementsApplyConfiguration) { c.WithResources(ac) }))
	}
	if spec.StartupProbe != nil {
		errs = append(errs, convert(spec.StartupProbe, func(ac *corev1ac.ProbeApplyConfiguration) { c.WithStartupProbe(ac) }))
	}
	if spec.LivenessProbe != nil {
		errs = append(errs, convert(spec.LivenessProbe, func(ac *corev1ac.ProbeApplyConfiguration) { c.WithLivenessProbe(ac) }))
	}
	// The readiness probe: the user's, or an HTTP GET of healthCheckPath, or by default a TCP check of the
	// primary port.
	primary := intstr.FromString(ports(app)[0].Name)
	switch {
	case spec.ReadinessProbe != nil:
		errs = append(errs, convert(spec.ReadinessProbe, func(ac *corev1ac.ProbeApplyConfiguration) { c.WithReadinessProbe(ac) }))
	case spec.HealthCheckPath != "":
		c.WithReadinessProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath(spec.HealthCheckPath).WithPort(primary)))
	default:
		c.WithReadinessProbe(corev1ac.Probe().WithTCPSocket(corev1ac.TCPSocketAction().WithPort(primary)))
	}
	return c, errors.Join(errs...)
}

// defaultPorts are the ports of a WebApp whose spec.ports is empty (one built in Go; the API server defaults it).
var defaultPorts = []webappv2.Port{{Name: "http", Port: 80}}

// withProcess sets a container's command, args and pull policy where the spec sets them (unset, the image's and
// the server's defaults stay theirs).
func withProcess(c *corev1ac.ContainerApplyConfiguration, command, args []string, pull corev1.PullPolicy) {
	if len(command) > 0 {
		c.WithCommand(command...)
	}
	if len(args) > 0 {
		c.WithArgs(args...)
	}
	if pull != "" {
		c.WithImagePullPolicy(pull)
	}
}

// ports are the WebApp's ports; the first is the primary one.
func ports(app *webappv2.WebApp) []webappv2.Port {
	if len(app.Spec.Ports) == 0 {
		return defaultPorts
	}
	return app.Spec.Ports
}

// maxReplicas is the most pods the WebApp can have: spec.replicas, or with autoscaling its maxReplicas.
func maxReplicas(app *webappv2.WebApp) int32 {
	if a := app.Spec.Autoscaling; a != nil {
		return a.MaxReplicas
	}
	return replicas(app)
}

// HPA is the HorizontalPodAutoscaler of an autoscaling WebApp (nil: none must exist): it scales the
// Deployment between minReplicas and maxReplicas on the CPU and memory targets (CPU 80% when neither is set); held
// (a blue/green's count at its switch, 0: none) raises its floor until the release ends.
func HPA(app *webappv2.WebApp, held int32) (*autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration, error) {
	a := app.Spec.Autoscaling
	if a == nil {
		return nil, nil
	}
	// A blue/green's switch holds the stable count (canary.State.Held) as the HPA's floor, within its bounds.
	floor := min(max(ptr.Deref(a.MinReplicas, 1), held), a.MaxReplicas)
	spec := autoscalingv2ac.HorizontalPodAutoscalerSpec().
		WithScaleTargetRef(autoscalingv2ac.CrossVersionObjectReference().WithAPIVersion("apps/v1").WithKind("Deployment").WithName(app.Name)).
		WithMinReplicas(floor).
		WithMaxReplicas(a.MaxReplicas)
	cpu, memory := a.TargetCPUUtilizationPercentage, a.TargetMemoryUtilizationPercentage
	if cpu == nil && memory == nil {
		cpu = ptr.To(webappv2.DefaultTargetCPUUtilizationPercentage)
	}
	for _, t := range []struct {
		name   corev1.ResourceName
		target *int32
	}{{corev1.ResourceCPU, cpu}, {corev1.ResourceMemory, memory}} {
		if t.target == nil {
			continue
		}
		spec.WithMetrics(autoscalingv2ac.MetricSpec().
			WithType(autoscalingv2.ResourceMetricSourceType).
			WithResource(autoscalingv2ac.ResourceMetricSource().
				WithName(t.name).
				WithTarget(autoscalingv2ac.MetricTarget().WithType(autoscalingv2.UtilizationMetricType).WithAverageUtilization(*t.target))))
	}
	var err error
	if b := serverFormBehavior(a.Behavior); b != nil {
		err = convert(b, func(ac *autoscalingv2ac.HorizontalPodAutoscalerBehaviorApplyConfiguration) { spec.WithBehavior(ac) })
	}
	return autoscalingv2ac.HorizontalPodAutoscaler(app.Name, app.Namespace).
		WithLabels(CommonLabels(app)).
		WithOwnerReferences(OwnerReference(app)).
		WithSpec(spec), err
}

// replicas is spec.replicas, or what unset means.
func replicas(app *webappv2.WebApp) int32 {
	return ptr.Deref(app.Spec.Replicas, webappv2.DefaultReplicas)
}

// The API server defaults and normalises some values it then records as ours. Where that happens to a field we own
// whole (inside a struct the schema makes atomic), or to a value we own (a quantity), we send the server's form
// ourselves; otherwise what we own never equals what we send and every resync costs a write. The whole class for
// what a WebApp can set, from the schema's atomic structs and the API's defaulting functions:
//   - env[].valueFrom.fieldRef (ObjectFieldSelector, atomic): apiVersion defaults to v1;
//   - env[].valueFrom.fileKeyRef (FileKeySelector, atomic): optional defaults to false;
//   - resources.requests and limits: every quantity is rounded up to milli precision.
//
// The other atomic structs a WebApp reaches (ConfigMapKeySelector, SecretKeySelector, ResourceFieldSelector,
// LocalObjectReference, LabelSelector, OwnerReference) have no defaults; defaults of granular structs (probe
// timings, HTTP scheme and path, the Service's policies) are owned by no manager, so they never differ.

// ServerFormEnv is e as the API server stores it in a pod template.
func ServerFormEnv(e corev1.EnvVar) corev1.EnvVar {
	if e.ValueFrom == nil {
		return e
	}
	from := e.ValueFrom.DeepCopy()
	if from.FieldRef != nil && from.FieldRef.APIVersion == "" {
		from.FieldRef.APIVersion = "v1"
	}
	if from.FileKeyRef != nil && from.FileKeyRef.Optional == nil {
		from.FileKeyRef.Optional = ptr.To(false)
	}
	e.ValueFrom = from
	return e
}

// serverFormBehavior is b without its empty parts: a scaling rule with no field set is the default rule, as an
// unset one is, but applied it would be a field we send and never own (an empty struct), costing a write per
// restart. nil when nothing is left. (The WebApp's behavior has the HPA's JSON form: it converts as it is.)
func serverFormBehavior(b *webappv2.AutoscalingBehavior) *webappv2.AutoscalingBehavior {
	if b == nil {
		return nil
	}
	out := b.DeepCopy()
	empty := func(r *webappv2.ScalingRules) bool {
		return r != nil && r.StabilizationWindowSeconds == nil && r.SelectPolicy == nil && len(r.Policies) == 0 && r.Tolerance == nil
	}
	if empty(out.ScaleUp) {
		out.ScaleUp = nil
	}
	if empty(out.ScaleDown) {
		out.ScaleDown = nil
	}
	if out.ScaleUp == nil && out.ScaleDown == nil {
		return nil
	}
	return out
}

// ServerFormResources is r with every quantity rounded up to milli precision, as the API server stores it.
func ServerFormResources(r corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := r.DeepCopy()
	for _, list := range []corev1.ResourceList{out.Requests, out.Limits} {
		for name, q := range list {
			q.RoundUp(-3)
			list[name] = q
		}
	}
	return *out
}

// convert decodes the typed API value into a new apply configuration (both have the same JSON form) and hands
// it to set.
func convert[AC any](typed any, set func(*AC)) error {
	ac := new(AC)
	if err := RoundTrip(typed, ac); err != nil {
		return fmt.Errorf("converting %T: %w", typed, err)
	}
	set(ac)
	return nil
}

// podSecurityContext and containerSecurityContext meet the restricted Pod Security Standard by default, the
// baseline one when the WebApp opts out for an image that must run as root.
func podSecurityContext(app *webappv2.WebApp) *corev1ac.PodSecurityContextApplyConfiguration {
	sc := corev1ac.PodSecurityContext().WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
	if app.Spec.Pod.Security != webappv2.PodSecurityBaseline {
		sc.WithRunAsNonRoot(true)
	}
	return sc
}

func containerSecurityContext(app *webappv2.WebApp) *corev1ac.SecurityContextApplyConfiguration {
	sc := corev1ac.SecurityContext().WithAllowPrivilegeEscalation(false)
	if app.Spec.Pod.Security != webappv2.PodSecurityBaseline {
		sc.WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))
	}
	return sc
}

// appSecurityContext is the app container's: the pods' standard, and a read-only root filesystem when asked.
func appSecurityContext(app *webappv2.WebApp) *corev1ac.SecurityContextApplyConfiguration {
	sc := containerSecurityContext(app)
	if app.Spec.Container.ReadOnlyRootFilesystem {
		sc.WithReadOnlyRootFilesystem(true)
	}
	return sc
}

// PDB is the PodDisruptionBudget that keeps all but one pod up during voluntary disruptions (node drains),
// or nil when there is a single replica: there is then nothing for it to protect.
func PDB(app *webappv2.WebApp) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	if maxReplicas(app) < 2 {
		return nil
	}
	return policyv1ac.PodDisruptionBudget(app.Name, app.Namespace).
		WithLabels(CommonLabels(app)).
		WithOwnerReferences(OwnerReference(app)).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithMaxUnavailable(intstr.FromInt32(1)).
			// Pods that are not ready (a bad image, a stuck rollout) must never block a node drain.
			WithUnhealthyPodEvictionPolicy(policyv1.AlwaysAllow).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(SelectorLabels(app))))
}

// progressDeadline is spec.rollout.progressDeadlineSeconds, or what unset means.
func progressDeadline(app *webappv2.WebApp) int32 {
	if d := app.Spec.Rollout.ProgressDeadlineSeconds; d > 0 {
		return d
	}
	return webappv2.DefaultProgressDeadlineSeconds
}

// Service is the complete Service we mean to own for app, with t the traffic the canary is sent: each port, by
// number, to the container's port of the same name, on the stable pods; on the canary's while a blue/green without
// a Gateway sends it all the traffic (CanarySwitched).
func Service(app *webappv2.WebApp, t canary.Traffic) *corev1ac.ServiceApplyConfiguration {
	svc := corev1ac.Service(app.Name, app.Namespace)
	if len(app.Spec.Service.Annotations) > 0 {
		svc.WithAnnotations(app.Spec.Service.Annotations)
	}
	selector := SelectorLabels(app)
	if CanarySwitched(app) && t.Weight >= 100 {
		selector = canarySelector(app)
	}
	spec := corev1ac.ServiceSpec().
		WithType(serviceType(app)).
		WithSelector(selector).
		WithPorts(servicePorts(app)...)
	return svc.
		WithLabels(CommonLabels(app)).
		WithOwnerReferences(OwnerReference(app)).
		WithSpec(spec)
}

// servicePorts are the ports of the WebApp's Services: each named port, to the container's port of that name.
func servicePorts(app *webappv2.WebApp) []*corev1ac.ServicePortApplyConfiguration {
	var out []*corev1ac.ServicePortApplyConfiguration
	for _, p := range ports(app) {
		out = append(out, corev1ac.ServicePort().
			WithName(p.Name).
			WithProtocol(corev1.ProtocolTCP).
			WithPort(p.Port).
			WithTargetPort(intstr.FromString(p.Name)))
	}
	return out
}

func serviceType(app *webappv2.WebApp) corev1.ServiceType {
	if app.Spec.Service.Type != "" {
		return app.Spec.Service.Type
	}
	return corev1.ServiceTypeClusterIP
}

// ServiceURL is the in-cluster address of app's Service.
func ServiceURL(app *webappv2.WebApp) string {
	return fmt.Sprintf("http://%s.%s.svc:%d", app.Name, app.Namespace, ports(app)[0].Port)
}

// ReplicasByHPA says the HorizontalPodAutoscaler decides the count, so our Deployment apply leaves it out: autoscaling
// is on and the HPA exists (hpaExists).
func ReplicasByHPA(app *webappv2.WebApp, hpaExists bool) bool {
	return app.Spec.Autoscaling != nil && hpaExists
}

// WebAppReplicas is the count the WebApp sets while no HPA does: spec.replicas (1 when unset), with autoscaling
// clamped into [minReplicas, maxReplicas], the range the HPA will keep it in when it takes the count over.
func WebAppReplicas(app *webappv2.WebApp) int32 {
	n := replicas(app)
	if a := app.Spec.Autoscaling; a != nil {
		n = min(max(n, ptr.Deref(a.MinReplicas, 1)), a.MaxReplicas)
	}
	return n
}

// RoundTrip decodes the JSON form of in into out: a typed object into its apply configuration or back, one shape
// compared with another (the builders, the write decision and the retained fields share it).
func RoundTrip(in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}
