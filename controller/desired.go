package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

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

// desiredDeployment is the complete Deployment we mean to own for app. Every field we own is set on every call:
// a field left out of an apply is released by our manager and may be reset by the server.
func desiredDeployment(app *webappv1.WebApp) *appsv1ac.DeploymentApplyConfiguration {
	return appsv1ac.Deployment(app.Name, app.Namespace).
		WithLabels(commonLabels(app)).
		WithOwnerReferences(ownerReference(app)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(app.Spec.Replicas).
			WithProgressDeadlineSeconds(progressDeadline(app)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(app))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(commonLabels(app)).
				WithSpec(corev1ac.PodSpec().
					WithContainers(corev1ac.Container().
						WithName(containerName).
						WithImage(app.Spec.Image).
						// The protocol is part of the list key the server records; leaving it to defaulting
						// would make our owned fields differ from what we send, and cost a write per reconcile.
						WithPorts(corev1ac.ContainerPort().
							WithName(portName).
							WithContainerPort(app.Spec.Port).
							WithProtocol(corev1.ProtocolTCP))))))
}

// progressDeadline is spec.progressDeadlineSeconds, or the API default when unset (a WebApp built in Go).
func progressDeadline(app *webappv1.WebApp) int32 {
	if app.Spec.ProgressDeadlineSeconds > 0 {
		return app.Spec.ProgressDeadlineSeconds
	}
	return 600
}

// desiredService is the complete ClusterIP Service we mean to own for app: spec.port to the container's named port.
func desiredService(app *webappv1.WebApp) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(app.Name, app.Namespace).
		WithLabels(commonLabels(app)).
		WithOwnerReferences(ownerReference(app)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithSelector(selectorLabels(app)).
			WithPorts(corev1ac.ServicePort().
				WithName(portName).
				WithProtocol(corev1.ProtocolTCP).
				WithPort(app.Spec.Port).
				WithTargetPort(intstr.FromString(portName))))
}

// serviceURL is the in-cluster address of app's Service.
func serviceURL(app *webappv1.WebApp) string {
	return fmt.Sprintf("http://%s.%s.svc:%d", app.Name, app.Namespace, app.Spec.Port)
}
