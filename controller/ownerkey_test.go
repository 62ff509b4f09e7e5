package controller

import (
	"context"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/ssa"
)

// childDeployment is a Deployment named name controlled by the WebApp of uid, with our entry as the server writes
// it (the owner reference keyed by the WebApp's UID) and another manager's entry beside it.
func childDeployment(name string, uid types.UID, controller bool) *appsv1.Deployment {
	fields := func(s string) *metav1.FieldsV1 { f := &metav1.FieldsV1{}; f.SetRawString(s); return f }
	ours := `{"f:metadata":{"f:labels":{"f:app":{}},"f:ownerReferences":{` + ssa.OwnerKey(uid) + `:{}}},"f:spec":{"f:replicas":{}}}`
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: "default", Labels: map[string]string{"app": name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "example.com/v2", Kind: "WebApp", Name: name, UID: uid, Controller: ptr.To(controller)}},
		ManagedFields: []metav1.ManagedFieldsEntry{
			{Manager: webappv2.FieldManager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1", FieldsType: "FieldsV1", FieldsV1: fields(ours)},
			{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", APIVersion: "apps/v1",
				FieldsType: "FieldsV1", FieldsV1: fields(`{"f:metadata":{"f:ownerReferences":{` + ssa.OwnerKey(uid) + `:{}}}}`)},
		},
	}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}
}

// The cache's copy of our entry names the owner by the placeholder, so children of one shape share it; the
// reconciler's copy has the owner's key back, and what it extracts is what the server's object gives.
func TestSharedOwnerKey(t *testing.T) {
	cases := []struct {
		name       string
		a, b       *appsv1.Deployment
		wantShared bool // our entries of a and b are one string in the cache
	}{
		{"two WebApps' Deployments of one shape", childDeployment("a", "uid-a", true), childDeployment("b", "uid-b", true), true},
		{"an owner that is not a controller: left as it is", childDeployment("a", "uid-a", false), childDeployment("b", "uid-b", false), false},
		{"no owner at all", &appsv1.Deployment{}, &appsv1.Deployment{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			server := tc.a.DeepCopy()
			before := tc.a.GetManagedFields()
			ca, err := onlyOurFields(tc.a.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			cb, _ := onlyOurFields(tc.b.DeepCopy())
			cachedA, cachedB := ca.(*appsv1.Deployment), cb.(*appsv1.Deployment)
			if got := ourFieldSet(cachedA) == ourFieldSet(cachedB); got != tc.wantShared {
				t.Errorf("shared %v, want %v:\n%s\n%s", got, tc.wantShared, ourFieldSet(cachedA), ourFieldSet(cachedB))
			}
			if strings.Contains(ourFieldSet(cachedA), "uid-a") && tc.wantShared {
				t.Errorf("the cache's entry still names the owner: %s", ourFieldSet(cachedA))
			}
			if !reflect.DeepEqual(tc.a.GetManagedFields(), before) {
				t.Error("the transform changed the entries it was given in place")
			}
			// What the reconciler reads: the server's entry, and the same extraction.
			cachedEntry := ourFieldSet(cachedA)
			read := cachedA.DeepCopy()
			ssa.WithOwnerKey(read)
			if ourFieldSet(read) != ourFieldSet(server) {
				t.Errorf("restored %s, want %s", ourFieldSet(read), ourFieldSet(server))
			}
			got, err := appsv1ac.ExtractDeployment(read, webappv2.FieldManager)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := appsv1ac.ExtractDeployment(server, webappv2.FieldManager)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("extracted %+v, want %+v", got.OwnerReferences, want.OwnerReferences)
			}
			if ourFieldSet(cachedA) != cachedEntry {
				t.Error("restoring changed the cache's copy")
			}
		})
	}
}

// The reconciler's client restores the key on copies (Get, List) and leaves a read in place alone.
func TestOwnerKeyClient(t *testing.T) {
	cached, _ := onlyOurFields(childDeployment("web", "uid-web", true))
	server := childDeployment("web", "uid-web", true)
	c := ssa.OwnerKeyClient{Client: oneDeployment{stored: cached.(*appsv1.Deployment)}}
	ctx := context.Background()

	got := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(server), got); err != nil {
		t.Fatal(err)
	}
	if ourFieldSet(got) != ourFieldSet(server) {
		t.Errorf("Get: %s, want %s", ourFieldSet(got), ourFieldSet(server))
	}
	list := &appsv1.DeploymentList{}
	if err := c.List(ctx, list); err != nil || len(list.Items) != 1 {
		t.Fatal(err, len(list.Items))
	}
	if ourFieldSet(&list.Items[0]) != ourFieldSet(server) {
		t.Errorf("List: %s, want %s", ourFieldSet(&list.Items[0]), ourFieldSet(server))
	}
	inPlace := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(server), inPlace, client.UnsafeDisableDeepCopy); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ourFieldSet(inPlace), ssa.OwnerKeyPlaceholder) {
		t.Errorf("a read in place was changed: %s", ourFieldSet(inPlace))
	}
}

// ourFieldSet is our entry's field set of obj.
func ourFieldSet(obj client.Object) string {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == webappv2.FieldManager && e.Subresource == "" {
			return e.FieldsV1.GetRawString()
		}
	}
	return ""
}

// oneDeployment is a cache of one Deployment, read as the informer's reader reads: a copy, or the stored object
// itself in place.
type oneDeployment struct {
	client.Client
	stored *appsv1.Deployment
}

func (c oneDeployment) Get(_ context.Context, _ client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if len(opts) > 0 && opts[0] == client.UnsafeDisableDeepCopy {
		*obj.(*appsv1.Deployment) = *c.stored
		return nil
	}
	c.stored.DeepCopyInto(obj.(*appsv1.Deployment))
	return nil
}

func (c oneDeployment) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	list.(*appsv1.DeploymentList).Items = []appsv1.Deployment{*c.stored.DeepCopy()}
	return nil
}
