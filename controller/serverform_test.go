package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/ssa"
)

func TestServerFormEnv(t *testing.T) {
	cases := []struct {
		name string
		in   corev1.EnvVar
		want corev1.EnvVarSource
	}{
		{"fieldRef without apiVersion gets v1", corev1.EnvVar{ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
		{"fieldRef apiVersion kept", corev1.EnvVar{ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "x"}}},
			corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "x"}}},
		{"fileKeyRef optional defaults to false", corev1.EnvVar{ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{Key: "k"}}},
			corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{Key: "k", Optional: ptr.To(false)}}},
		{"fileKeyRef optional true kept", corev1.EnvVar{ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{Key: "k", Optional: ptr.To(true)}}},
			corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{Key: "k", Optional: ptr.To(true)}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			orig := tc.in.DeepCopy()
			got := desired.ServerFormEnv(tc.in)
			if got.ValueFrom == nil || !equalJSON(t, *got.ValueFrom, tc.want) {
				t.Errorf("got %+v, want %+v", got.ValueFrom, tc.want)
			}
			if !equalJSON(t, tc.in, *orig) {
				t.Errorf("the WebApp's own env var was changed")
			}
		})
	}
	if plain := desired.ServerFormEnv(corev1.EnvVar{Name: "A", Value: "1"}); plain.ValueFrom != nil || plain.Value != "1" {
		t.Errorf("plain value changed: %+v", plain)
	}
}

func TestServerFormResourcesRoundsUpToMilli(t *testing.T) {
	cases := map[string]string{"1n": "1m", "1.5m": "2m", "100m": "100m", "1.5": "1500m", "250000u": "250m", "64Mi": "64Mi", "0.1": "100m"}
	for in, want := range cases {
		r := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(in)}, Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(in)}}
		got := desired.ServerFormResources(r)
		for _, q := range []resource.Quantity{got.Requests[corev1.ResourceCPU], got.Limits[corev1.ResourceMemory]} {
			if w := resource.MustParse(want); q.Cmp(w) != 0 {
				t.Errorf("%s rounded to %s, want %s", in, q.String(), want)
			}
		}
		if orig := r.Requests[corev1.ResourceCPU]; orig.Cmp(resource.MustParse(in)) != 0 {
			t.Errorf("%s: the WebApp's own quantity was changed to %s", in, orig.String())
		}
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	same, err := ssa.OwnedFieldsMatch[any](a, b)
	if err != nil {
		t.Fatal(err)
	}
	return same
}
