package controller

import (
	"errors"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/utils/ptr"

	webappv1 "github.com/example/webapp-operator/apis/v1"
)

const (
	// FieldManager is the one field manager every apply of the operator is sent under; field ownership in
	// managedFields is recorded against it.
	FieldManager = "webapp-operator"

	// LabelName is the recommended name label, put on everything we create (value "webapp").
	LabelName = "app.kubernetes.io/name"
	// LabelInstance carries the WebApp's name; with LabelName it selects the WebApp's pods.
	LabelInstance = "app.kubernetes.io/instance"
	// LabelManagedBy says the object is ours (value ManagedBy); the operator's cache filters on it.
	LabelManagedBy = "app.kubernetes.io/managed-by"

	// appName is the value of LabelName.
	appName = "webapp"
	// ManagedBy is the value of LabelManagedBy.
	ManagedBy = "webapp-operator"

	// containerName and portName name the single container and its port; the Service targets the port by name.
	containerName = "app"
	portName      = "http"
)

// selectorLabels select the pods of one WebApp. Both labels are used, so pods of another tool that only share
// the instance label (a Helm release of the same name, say) are never selected.
func selectorLabels(app *webappv1.WebApp) map[string]string {
	return map[string]string{LabelName: appName, LabelInstance: app.Name}
}

// commonLabels go on the Deployment, its pod template and the Service.
func commonLabels(app *webappv1.WebApp) map[string]string {
	l := selectorLabels(app)
	l[LabelManagedBy] = ManagedBy
	return l
}

// ownerReference makes the WebApp the controller of a child, so garbage collection deletes the child with it.
func ownerReference(app *webappv1.WebApp) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(webappv1.GroupVersion.String()).
		WithKind("WebApp").
		WithName(app.Name).
		WithUID(app.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// ConfigHashAnnotation on the pod template holds a hash of the data of the ConfigMaps and Secrets the WebApp's
// environment refers to: when they change, the pod template changes and the Deployment rolls the pods.
const ConfigHashAnnotation = "webapp.example.com/config-hash"

// desiredDeployment is the complete Deployment we mean to own for app. Every field we own is set on every call:
// a field left out of an apply is released by our manager and may be reset by the server. configHash is the
// hash of the referenced configuration ("" when the WebApp refers to none).
func desiredDeployment(app *webappv1.WebApp, configHash string) (*appsv1ac.DeploymentApplyConfiguration, error) {
	template, err := desiredPodTemplate(app, configHash)
	if err != nil {
		return nil, err
	}
	spec := appsv1ac.DeploymentSpec().
		WithReplicas(app.Spec.Replicas).
		WithProgressDeadlineSeconds(progressDeadline(app)).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(app))).
		WithTemplate(template)
	if app.Spec.RevisionHistoryLimit != nil {
		spec.WithRevisionHistoryLimit(*app.Spec.RevisionHistoryLimit)
	}
	if s := app.Spec.Strategy; s.MaxSurge != nil || s.MaxUnavailable != nil {
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
		WithLabels(commonLabels(app)).
		WithOwnerReferences(ownerReference(app)).
		WithSpec(spec), nil
}

// desiredPodTemplate is the pod template: the user's pod labels and annotations under ours, one container, the
// pull secrets, and the security context of the chosen Pod Security Standard.
func desiredPodTemplate(app *webappv1.WebApp, configHash string) (*corev1ac.PodTemplateSpecApplyConfiguration, error) {
	labels := maps.Clone(app.Spec.PodLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, commonLabels(app))
	annotations := maps.Clone(app.Spec.PodAnnotations)
	if configHash != "" {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[ConfigHashAnnotation] = configHash
	}
	container, err := desiredContainer(app)
	if err != nil {
		return nil, err
	}
	pod := corev1ac.PodSpec().
		WithContainers(container).
		WithSecurityContext(podSecurityContext(app))
	for _, s := range app.Spec.ImagePullSecrets {
		pod.WithImagePullSecrets(corev1ac.LocalObjectReference().WithName(s.Name))
	}
	t := corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(pod)
	if len(annotations) > 0 {
		t.WithAnnotations(annotations)
	}
	return t, nil
}

// desiredContainer is the one container, named app, with its port named http. The user's env, envFrom,
// resources and probes are the API's own types, converted to apply configurations as they are.
func desiredContainer(app *webappv1.WebApp) (*corev1ac.ContainerApplyConfiguration, error) {
	c := corev1ac.Container().
		WithName(containerName).
		WithImage(app.Spec.Image).
		// The protocol is part of the list key the server records; leaving it to defaulting would make our
		// owned fields differ from what we send, and cost a write per reconcile.
		WithPorts(corev1ac.ContainerPort().WithName(portName).WithContainerPort(app.Spec.Port).WithProtocol(corev1.ProtocolTCP)).
		WithSecurityContext(containerSecurityContext(app))
	if len(app.Spec.Command) > 0 {
		c.WithCommand(app.Spec.Command...)
	}
	if len(app.Spec.Args) > 0 {
		c.WithArgs(app.Spec.Args...)
	}
	if app.Spec.ImagePullPolicy != "" {
		c.WithImagePullPolicy(app.Spec.ImagePullPolicy)
	}
	var errs []error
	for i := range app.Spec.Env {
		env := serverFormEnv(app.Spec.Env[i])
		errs = append(errs, convert(&env, func(ac *corev1ac.EnvVarApplyConfiguration) { c.WithEnv(ac) }))
	}
	for i := range app.Spec.EnvFrom {
		errs = append(errs, convert(&app.Spec.EnvFrom[i], func(ac *corev1ac.EnvFromSourceApplyConfiguration) { c.WithEnvFrom(ac) }))
	}
	if r := app.Spec.Resources; len(r.Requests) > 0 || len(r.Limits) > 0 || len(r.Claims) > 0 {
		r = serverFormResources(r)
		errs = append(errs, convert(&r, func(ac *corev1ac.ResourceRequirementsApplyConfiguration) { c.WithResources(ac) }))
	}
	if app.Spec.LivenessProbe != nil {
		errs = append(errs, convert(app.Spec.LivenessProbe, func(ac *corev1ac.ProbeApplyConfiguration) { c.WithLivenessProbe(ac) }))
	}
	// The readiness probe: the user's, or an HTTP GET of healthCheckPath, or by default a TCP check of the port.
	switch {
	case app.Spec.ReadinessProbe != nil:
		errs = append(errs, convert(app.Spec.ReadinessProbe, func(ac *corev1ac.ProbeApplyConfiguration) { c.WithReadinessProbe(ac) }))
	case app.Spec.HealthCheckPath != "":
		c.WithReadinessProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath(app.Spec.HealthCheckPath).WithPort(intstr.FromString(portName))))
	default:
		c.WithReadinessProbe(corev1ac.Probe().WithTCPSocket(corev1ac.TCPSocketAction().WithPort(intstr.FromString(portName))))
	}
	return c, errors.Join(errs...)
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

// serverFormEnv is e as the API server stores it in a pod template.
func serverFormEnv(e corev1.EnvVar) corev1.EnvVar {
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

// serverFormResources is r with every quantity rounded up to milli precision, as the API server stores it.
func serverFormResources(r corev1.ResourceRequirements) corev1.ResourceRequirements {
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
	if err := roundTrip(typed, ac); err != nil {
		return fmt.Errorf("converting %T: %w", typed, err)
	}
	set(ac)
	return nil
}

// podSecurityContext and containerSecurityContext meet the restricted Pod Security Standard by default, the
// baseline one when the WebApp opts out for an image that must run as root.
func podSecurityContext(app *webappv1.WebApp) *corev1ac.PodSecurityContextApplyConfiguration {
	sc := corev1ac.PodSecurityContext().WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
	if app.Spec.PodSecurity != webappv1.PodSecurityBaseline {
		sc.WithRunAsNonRoot(true)
	}
	return sc
}

func containerSecurityContext(app *webappv1.WebApp) *corev1ac.SecurityContextApplyConfiguration {
	sc := corev1ac.SecurityContext().WithAllowPrivilegeEscalation(false)
	if app.Spec.PodSecurity != webappv1.PodSecurityBaseline {
		sc.WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))
	}
	return sc
}

// desiredPDB is the PodDisruptionBudget that keeps all but one pod up during voluntary disruptions (node drains),
// or nil when there is a single replica: there is then nothing for it to protect.
func desiredPDB(app *webappv1.WebApp) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	if app.Spec.Replicas < 2 {
		return nil
	}
	return policyv1ac.PodDisruptionBudget(app.Name, app.Namespace).
		WithLabels(commonLabels(app)).
		WithOwnerReferences(ownerReference(app)).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithMaxUnavailable(intstr.FromInt32(1)).
			// Pods that are not ready (a bad image, a stuck rollout) must never block a node drain.
			WithUnhealthyPodEvictionPolicy(policyv1.AlwaysAllow).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(app))))
}

// progressDeadline is spec.progressDeadlineSeconds, or the API default when unset (a WebApp built in Go).
func progressDeadline(app *webappv1.WebApp) int32 {
	if app.Spec.ProgressDeadlineSeconds > 0 {
		return app.Spec.ProgressDeadlineSeconds
	}
	return 600
}

// desiredService is the complete Service we mean to own for app: spec.port to the container's named port.
func desiredService(app *webappv1.WebApp) *corev1ac.ServiceApplyConfiguration {
	svc := corev1ac.Service(app.Name, app.Namespace)
	if len(app.Spec.Service.Annotations) > 0 {
		svc.WithAnnotations(app.Spec.Service.Annotations)
	}
	return svc.
		WithLabels(commonLabels(app)).
		WithOwnerReferences(ownerReference(app)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(serviceType(app)).
			WithSelector(selectorLabels(app)).
			WithPorts(corev1ac.ServicePort().
				WithName(portName).
				WithProtocol(corev1.ProtocolTCP).
				WithPort(app.Spec.Port).
				WithTargetPort(intstr.FromString(portName))))
}

func serviceType(app *webappv1.WebApp) corev1.ServiceType {
	if app.Spec.Service.Type != "" {
		return app.Spec.Service.Type
	}
	return corev1.ServiceTypeClusterIP
}

// serviceURL is the in-cluster address of app's Service.
func serviceURL(app *webappv1.WebApp) string {
	return fmt.Sprintf("http://%s.%s.svc:%d", app.Name, app.Namespace, app.Spec.Port)
}
