package controller

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// The cache keeps of managedFields only our manager's entries (all of them: apply, status, a guarded patch), and
// no last-applied-configuration; everything else of the object stays.
func TestOnlyOurFields(t *testing.T) {
	entry := func(manager, op, sub string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationType(op), Subresource: sub}
	}
	cases := []struct {
		name string
		obj  interface {
			GetManagedFields() []metav1.ManagedFieldsEntry
		}
		wantEntries []string
		wantAnn     map[string]string
	}{
		{"a Deployment with the controller-manager's status", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
			Annotations: map[string]string{"deployment.kubernetes.io/revision": "2"},
			ManagedFields: []metav1.ManagedFieldsEntry{entry(webappv2.FieldManager, "Apply", ""), entry("kube-controller-manager", "Update", "status"),
				entry("kubectl-edit", "Update", "")},
		}}, []string{webappv2.FieldManager + "/Apply/"}, map[string]string{"deployment.kubernetes.io/revision": "2"}},
		{"a WebApp applied client-side", &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{
			Annotations: map[string]string{lastApplied: `{"spec":{}}`, "team": "a"},
			ManagedFields: []metav1.ManagedFieldsEntry{entry("kubectl-client-side-apply", "Update", ""), entry(webappv2.FieldManager, "Apply", "status"),
				entry(webappv2.FieldManager, "Apply", ""), entry(webappv2.FieldManager, "Update", "")},
		}}, []string{webappv2.FieldManager + "/Apply/status", webappv2.FieldManager + "/Apply/", webappv2.FieldManager + "/Update/"}, map[string]string{"team": "a"}},
		{"nothing to drop", &webappv2.WebApp{}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := onlyOurFields(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			obj := out.(interface {
				GetManagedFields() []metav1.ManagedFieldsEntry
				GetAnnotations() map[string]string
			})
			var got []string
			for _, e := range obj.GetManagedFields() {
				got = append(got, e.Manager+"/"+string(e.Operation)+"/"+e.Subresource)
			}
			if len(got) != len(tc.wantEntries) || len(obj.GetAnnotations()) != len(tc.wantAnn) {
				t.Fatalf("entries %v annotations %v, want %v and %v", got, obj.GetAnnotations(), tc.wantEntries, tc.wantAnn)
			}
			for i := range got {
				if got[i] != tc.wantEntries[i] {
					t.Errorf("entries %v, want %v", got, tc.wantEntries)
				}
			}
			for k, v := range tc.wantAnn {
				if obj.GetAnnotations()[k] != v {
					t.Errorf("annotations %v, want %v", obj.GetAnnotations(), tc.wantAnn)
				}
			}
		})
	}
}
