// Package apptest holds what the operator's unit tests share: WebApps to build from and checks of what the
// builders made. Test helpers only; nothing here runs in the operator.
package apptest

import (
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// NewApp is a WebApp of one port named http, in namespace ns, at generation 1.
func NewApp(name string, replicas, port int32, image string) *webappv2.WebApp {
	return &webappv2.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Generation: 1},
		Spec:       webappv2.WebAppSpec{Image: image, Replicas: &replicas, Ports: []webappv2.Port{{Name: "http", Port: port}}},
	}
}

// Typed decodes an apply configuration into its typed object, the shape the API server stores.
func Typed[T any](t *testing.T, ac any) *T {
	t.Helper()
	out := new(T)
	data, err := json.Marshal(ac)
	if err == nil {
		err = json.Unmarshal(data, out)
	}
	if err != nil {
		t.Fatalf("decoding %T: %v", ac, err)
	}
	return out
}

// CheckOwner fails the test unless refs is the one controller owner reference the builders put on every child.
func CheckOwner(t *testing.T, refs []metav1.OwnerReference, app *webappv2.WebApp) {
	t.Helper()
	if len(refs) != 1 {
		t.Fatalf("owner references = %+v", refs)
	}
	r := refs[0]
	if r.APIVersion != "example.com/v1" || r.Kind != "WebApp" || r.Name != app.Name || r.UID != app.UID ||
		r.Controller == nil || !*r.Controller || r.BlockOwnerDeletion == nil || !*r.BlockOwnerDeletion {
		t.Errorf("owner reference = %+v", r)
	}
}

// FullSpecApp sets every optional field that reaches the Deployment.
func FullSpecApp() *webappv2.WebApp {
	app := NewApp("full", 3, 8080, "registry.example/shop:2")
	s := &app.Spec
	s.Container.Command, s.Container.Args = []string{"/shop"}, []string{"--json"}
	s.Container.Env = []corev1.EnvVar{{Name: "MODE", Value: "prod"}}
	s.Container.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}}
	s.Container.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000m")}}
	s.Container.HealthCheckPath = "/healthz"
	s.Container.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/livez", Port: intstr.FromString("http")}}}
	s.Pod.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
	s.Pod.Labels, s.Pod.Annotations = map[string]string{"team": "payments"}, map[string]string{"a": "b"}
	s.Rollout = webappv2.RolloutSpec{MaxSurge: ptr.To(intstr.FromInt32(1))}
	s.Rollout.RevisionHistoryLimit = ptr.To(int32(3))
	return app
}

// JSON renders an apply configuration (or nil) as the JSON sent to the API server; an error fails the test.
func JSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Exposed is a WebApp of two ports (http and metrics) exposed as e says.
func Exposed(e webappv2.Expose) *webappv2.WebApp {
	app := NewApp("shop", 2, 8080, "shop:1")
	app.Spec.Ports = append(app.Spec.Ports, webappv2.Port{Name: "metrics", Port: 9090})
	app.Spec.Expose = &e
	return app
}

// Waiting is a pod whose container waits for reason (its message says so), running image, after last ended.
func Waiting(reason, image string, last *corev1.ContainerStateTerminated) corev1.Pod {
	return corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name: "app", Image: image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "words that change " + reason}},
		LastTerminationState: corev1.ContainerState{Terminated: last},
	}}}}
}

// Running is a pod whose container runs, not ready.
func Running() corev1.Pod {
	return corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
}

// Unschedulable is a pod the scheduler could not place, saying msg.
func Unschedulable(msg string) corev1.Pod {
	return corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}}}}
}

// ControllerRef is a controller owner reference to an object of kind (group apps), name and uid.
func ControllerRef(kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}
}

// Deployment is a Deployment at generation gen, its status as its controller reports it.
func Deployment(gen, observed int64, spec, replicas, updated, ready, available int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: gen},
		Spec:       appsv1.DeploymentSpec{Replicas: &spec},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated,
			ReadyReplicas: ready, AvailableReplicas: available, Conditions: conds,
		},
	}
}
