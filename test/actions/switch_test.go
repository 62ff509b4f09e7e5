package actions

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
)

// TestUnderTheSwitch: invariant 12's judgement of a canary Deployment's deletion by its Service's versions, so that a
// run whose deletions all come after the selector's Retire (or never followed a switch) is told from one that would
// break it: deleted under the switch, or too soon after it left; a selector another manager set is not the switch.
func TestUnderTheSwitch(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 23, 0, 0, 0, time.UTC)
	const owner = types.UID("web-uid")
	service := func(rv int64, at time.Duration, canarySelector bool, manager string) version {
		sel := map[string]any{webappv2.LabelName: webappv2.AppName, webappv2.LabelInstance: "web"}
		fields := `{"f:spec":{"f:selector":{"f:` + webappv2.LabelName + `":{},"f:` + webappv2.LabelInstance + `":{}}}}`
		if canarySelector {
			sel = map[string]any{webappv2.LabelName: webappv2.AppName, webappv2.LabelCanaryOf: "web"}
			fields = `{"f:spec":{"f:selector":{"f:` + webappv2.LabelName + `":{},"f:` + webappv2.LabelCanaryOf + `":{}}}}`
		}
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "web"},
			"spec": map[string]any{"selector": sel}}}
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.com/v2", Kind: "WebApp", Name: "web", UID: owner, Controller: new(true)}})
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(fields)}})
		return version{at: t0.Add(at), rv: rv, obj: u}
	}
	deleted := version{at: t0.Add(20 * time.Second), rv: 100, deleted: true, obj: &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "web-canary"}}}}
	ours := webappv2.FieldManager
	for _, c := range []struct {
		name     string
		services []version
		retire   time.Duration
		switched bool
		wrong    string // a fragment of what is wrong ("": nothing)
	}{
		{"retireSeconds 3, deleted 4 s after the switch back", []version{service(2, time.Second, true, ours), service(3, 16*time.Second, false, ours)}, 3 * time.Second, true, ""},
		{"retireSeconds 30, deleted 15 s after the switch back", []version{service(2, time.Second, true, ours), service(3, 5*time.Second, false, ours)}, 30 * time.Second, true, "deleted 15s after"},
		{"never switched", []version{service(1, 0, false, ours)}, 0, false, ""},
		{"switched, then back Retire before", []version{service(1, 0, false, ours), service(2, time.Second, true, ours), service(3, 5*time.Second, false, ours)}, 0, true, ""},
		{"deleted while switched", []version{service(1, 0, false, ours), service(2, time.Second, true, ours)}, 0, true, "while Service web, as the operator applied it, selected its pods"},
		{"deleted 3 s after the switch back", []version{service(2, time.Second, true, ours), service(3, 17*time.Second, false, ours)}, 0, true, "was deleted 3s after Service web's selector left its pods"},
		{"switched back twice: counted from the last", []version{service(2, time.Second, true, ours), service(3, 2*time.Second, false, ours), service(4, 10*time.Second, true, ours), service(5, 16*time.Second, false, ours)}, 0, true, "deleted 4s after"},
		{"the Service deleted while switched: the traffic left with it", []version{service(2, time.Second, true, ours), {at: t0.Add(2 * time.Second), rv: 3, deleted: true, obj: service(3, 0, true, ours).obj}}, 0, true, ""},
		{"a selector another manager set is not the switch", []version{service(2, time.Second, true, "kubectl-edit")}, 0, false, ""},
		{"a version after the deletion does not count", []version{service(2, time.Second, true, ours), service(3, 5*time.Second, false, ours), {at: t0.Add(25 * time.Second), rv: 101, obj: service(101, 0, true, ours).obj}}, 0, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			retire := c.retire
			if retire == 0 {
				retire = canary.Retire
			}
			switched, wrong := underTheSwitch(deleted, c.services, owner, retire)
			if switched != c.switched || (c.wrong == "") != (wrong == "") || !strings.Contains(wrong, c.wrong) {
				t.Errorf("underTheSwitch = %v, %q; want %v, %q", switched, wrong, c.switched, c.wrong)
			}
		})
	}
}
