package conversion

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMoveEntries: entries of an unserved version that own only metadata and status are relabelled to the storage
// version, others of it are dropped, and entries of served versions are left as they are.
func TestMoveEntries(t *testing.T) {
	entry := func(manager, version, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, APIVersion: "example.com/" + version, FieldsV1: metav1.NewFieldsV1(fields)}
	}
	in := []metav1.ManagedFieldsEntry{
		entry("webapp-operator", "v2", `{"f:status":{"f:url":{}}}`),
		entry("webapp-operator", "v2", `{"f:metadata":{"f:finalizers":{}}}`),
		entry("kubectl", "v2", `{"f:spec":{"f:ports":{}}}`),
		entry("kubectl", "v1", `{"f:spec":{"f:port":{}}}`),
	}
	out, changed := moveEntries(in, "example.com", "v1", []string{"v2"})
	if !changed || len(out) != 3 {
		t.Fatalf("changed %v, entries %+v", changed, out)
	}
	for i, want := range []string{"webapp-operator example.com/v1", "webapp-operator example.com/v1", "kubectl example.com/v1"} {
		if got := out[i].Manager + " " + out[i].APIVersion; got != want {
			t.Errorf("entry %d = %s, want %s", i, got, want)
		}
	}
	if out[2].FieldsV1.GetRawString() != `{"f:spec":{"f:port":{}}}` {
		t.Errorf("the served version's entry changed: %s", out[2].FieldsV1.GetRawString())
	}
	if _, changed := moveEntries(in, "example.com", "v2", nil); changed {
		t.Errorf("with every version served nothing moves")
	}
}
