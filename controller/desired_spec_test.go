package controller

import (
	"reflect"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/internal/apptest"
	"github.com/example/webapp-operator/controller/status"
)

func TestConfigRefs(t *testing.T) {
	app := apptest.NewApp("x", 1, 80, "nginx")
	app.Spec.Container.Env = []corev1.EnvVar{
		{Name: "A", Value: "plain"},
		{Name: "B", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "b"}}},
		{Name: "C", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "c"}}},
		{Name: "D", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
	}
	app.Spec.Container.EnvFrom = []corev1.EnvFromSource{
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "all"}}},
	}
	got := configRefs(app)
	want := []string{"configmap/cfg", "secret/all", "secret/sec"}
	if !slices.Equal(got, want) {
		t.Fatalf("configRefs = %v, want %v", got, want)
	}
	if refs := configRefs(apptest.NewApp("y", 1, 80, "nginx")); len(refs) != 0 {
		t.Errorf("no env: configRefs = %v", refs)
	}
}

// TestDesiredDeploymentCountAndTheHPA: the Deployment's count is the WebApp's until its HPA exists (clamped into
// the HPA's range with autoscaling on, so the HPA takes over a count it keeps), and left out once it does; the
// status says the same (who sets the count, and the count asked for), from the same input.
func TestDesiredDeploymentCountAndTheHPA(t *testing.T) {
	auto := func(lo *int32, hi int32) *webappv2.Autoscaling {
		return &webappv2.Autoscaling{MinReplicas: lo, MaxReplicas: hi}
	}
	dep := apptest.Deployment(1, 1, 6, 6, 6, 6, 6) // the HPA's count: 6
	cases := []struct {
		name      string
		replicas  *int32
		a         *webappv2.Autoscaling
		hpaExists bool
		want      *int32 // in the Deployment's apply
		setBy     string
		desired   int32
	}{
		{"no autoscaling", ptr.To(int32(5)), nil, false, ptr.To(int32(5)), "WebApp", 5},
		{"no autoscaling, an HPA left to delete", ptr.To(int32(5)), nil, true, ptr.To(int32(5)), "WebApp", 5},
		{"no autoscaling, unset", nil, nil, false, ptr.To(int32(1)), "WebApp", 1},
		{"no HPA yet, in range", ptr.To(int32(5)), auto(ptr.To(int32(2)), 8), false, ptr.To(int32(5)), "WebApp", 5},
		{"no HPA yet, below minReplicas", ptr.To(int32(1)), auto(ptr.To(int32(2)), 8), false, ptr.To(int32(2)), "WebApp", 2},
		{"no HPA yet, above maxReplicas", ptr.To(int32(10)), auto(nil, 8), false, ptr.To(int32(8)), "WebApp", 8},
		{"no HPA yet, unset count and minReplicas", nil, auto(nil, 3), false, ptr.To(int32(1)), "WebApp", 1},
		{"no HPA yet, unset count", nil, auto(ptr.To(int32(3)), 5), false, ptr.To(int32(3)), "WebApp", 3},
		{"the HPA exists", ptr.To(int32(5)), auto(ptr.To(int32(2)), 8), true, nil, "HorizontalPodAutoscaler", 6},
		// Bounds changed since the HPA last scaled: the count it brings the Deployment to at its next sync (the
		// Deployment's 6 is not this generation's yet; seen by the action test, seed 24).
		{"the HPA exists, its maximum lowered below its count", ptr.To(int32(5)), auto(ptr.To(int32(1)), 4), true, nil, "HorizontalPodAutoscaler", 4},
		{"the HPA exists, its minimum raised above its count", ptr.To(int32(5)), auto(ptr.To(int32(7)), 9), true, nil, "HorizontalPodAutoscaler", 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app := apptest.NewApp("x", 1, 80, "nginx")
			app.Spec.Replicas, app.Spec.Autoscaling = tc.replicas, tc.a
			ac, err := desired.Deployment(app, desired.Inputs{HPAExists: tc.hpaExists})
			if err != nil {
				t.Fatal(err)
			}
			if got := apptest.Typed[appsv1.Deployment](t, ac).Spec.Replicas; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("replicas = %v, want %v", ptr.Deref(got, -1), ptr.Deref(tc.want, -1))
			}
			obs := status.Observation{Dep: dep, Known: true, ReplicasByHPA: desired.ReplicasByHPA(app, tc.hpaExists)}
			st := apptest.Typed[webappv2.WebApp](t, status.Desired(app, app, obs, nil, metav1.Now())).Status
			if st.ReplicasSetBy != tc.setBy || st.DesiredReplicas != tc.desired {
				t.Errorf("status: %d set by %q, want %d set by %q", st.DesiredReplicas, st.ReplicasSetBy, tc.desired, tc.setBy)
			}
		})
	}
}
