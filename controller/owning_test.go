package controller

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestOwningWebApp(t *testing.T) {
	yes, no := true, false
	ref := func(apiVersion, kind, name string, controller *bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: "u", Controller: controller}
	}
	for _, tc := range []struct {
		name string
		refs []metav1.OwnerReference
		want types.NamespacedName
		ok   bool
	}{
		{"no owner", nil, types.NamespacedName{}, false},
		{"controlled by a v2 WebApp", []metav1.OwnerReference{ref("example.com/v2", "WebApp", "web", &yes)}, types.NamespacedName{Namespace: "ns", Name: "web"}, true},
		{"controlled by a v1 WebApp (any version of the API)", []metav1.OwnerReference{ref("example.com/v1", "WebApp", "web", &yes)}, types.NamespacedName{Namespace: "ns", Name: "web"}, true},
		{"a WebApp owns it but does not control it", []metav1.OwnerReference{ref("example.com/v2", "WebApp", "web", &no)}, types.NamespacedName{}, false},
		{"a WebApp reference without controller", []metav1.OwnerReference{ref("example.com/v2", "WebApp", "web", nil)}, types.NamespacedName{}, false},
		{"controlled by a WebApp of another group", []metav1.OwnerReference{ref("other.example.org/v1", "WebApp", "web", &yes)}, types.NamespacedName{}, false},
		{"controlled by another kind", []metav1.OwnerReference{ref("apps/v1", "ReplicaSet", "web", &yes)}, types.NamespacedName{}, false},
		{"an unparsable apiVersion", []metav1.OwnerReference{ref("example.com/v2/x", "WebApp", "web", &yes)}, types.NamespacedName{}, false},
		{"the controller among other owners", []metav1.OwnerReference{ref("v1", "ConfigMap", "c", &no), ref("example.com/v2", "WebApp", "b", &yes)}, types.NamespacedName{Namespace: "ns", Name: "b"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "child", OwnerReferences: tc.refs}}
			got, ok := owningWebApp(d)
			if got != tc.want || ok != tc.ok {
				t.Errorf("owningWebApp = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
