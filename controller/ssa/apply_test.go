package ssa

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/utils/ptr"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	webappv2ac "github.com/example/webapp-operator/applyconfig/apis/v2"
)

// A create-only apply sets the resourceVersion of every kind's apply configuration, and clears it when refused.
func TestSetResourceVersion(t *testing.T) {
	for _, ac := range []interface{ GetName() *string }{
		appsv1ac.Deployment("web", "ns"), corev1ac.Service("web", "ns"), policyv1ac.PodDisruptionBudget("web", "ns"), webappv2ac.WebApp("web", "ns"),
	} {
		if err := setResourceVersion(ac, ptr.To("1")); err != nil {
			t.Fatal(err)
		}
		if rv := reflect.ValueOf(ac).Elem().FieldByName("ResourceVersion").Interface().(*string); rv == nil || *rv != "1" {
			t.Errorf("%T: resourceVersion %v after setting it", ac, rv)
		}
		if err := setResourceVersion(ac, nil); err != nil {
			t.Fatal(err)
		}
		if rv := reflect.ValueOf(ac).Elem().FieldByName("ResourceVersion").Interface().(*string); rv != nil {
			t.Errorf("%T: resourceVersion %q after clearing it", ac, *rv)
		}
	}
	if err := setResourceVersion(&struct{ Name string }{}, nil); err == nil {
		t.Error("no error for a type without a resourceVersion")
	}
}

// A child is taken over only when its WebApp controls it, or when nothing does and it carries our managed-by label
// with the WebApp's own name as its instance: a child an Orphan deletion released from a WebApp of this name.
func TestNotOursReason(t *testing.T) {
	web := &metav1.ObjectMeta{Name: "web", UID: "uid-web"}
	ours := map[string]string{webappv2.LabelManagedBy: webappv2.ManagedBy, webappv2.LabelInstance: "web"}
	controlled := func(uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: "WebApp", Name: "x", UID: uid, Controller: ptr.To(true)}}
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		owners []metav1.OwnerReference
		want   string // "" when it may be taken over, else a part of the reason
	}{
		{name: "controlled by the WebApp", labels: ours, owners: controlled("uid-web")},
		{name: "controlled by the WebApp, labels gone", owners: controlled("uid-web")},
		{name: "controlled by another", labels: ours, owners: controlled("uid-other"), want: "is controlled by WebApp x"},
		{name: "released by the WebApp", labels: ours},
		{name: "released by a WebApp of another name", labels: map[string]string{webappv2.LabelManagedBy: webappv2.ManagedBy, webappv2.LabelInstance: "web-canary"},
			want: `released by WebApp "web-canary"`},
		{name: "released, its instance label gone", labels: map[string]string{webappv2.LabelManagedBy: webappv2.ManagedBy}, want: "has no app.kubernetes.io/instance label"},
		{name: "someone else's", labels: map[string]string{webappv2.LabelInstance: "web"}, want: "is not managed by " + webappv2.ManagedBy},
		{name: "an owner that is not a controller", labels: map[string]string{webappv2.LabelInstance: "web"},
			owners: []metav1.OwnerReference{{Kind: "WebApp", Name: "web", UID: "uid-web"}}, want: "is not managed by"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web-canary", Labels: tc.labels, OwnerReferences: tc.owners}}
			got := NotOursReason(obj, web)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("NotOursReason = %q, want %q", got, tc.want)
			}
		})
	}
}
