package ssa

import (
	"reflect"
	"testing"

	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/utils/ptr"

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
