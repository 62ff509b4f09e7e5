package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/internal/apptest"
)

// A reconcile observes, decides, then writes: what its decisions take (the pods, their probes' events, the
// ConfigMaps and Secrets) is read before its first write.
func TestReconcileObservesBeforeItWrites(t *testing.T) {
	// A rollout under way (the Deployment's controller has reported nothing), its pod unable to pull its image.
	// Read only by the observation: the writes read the children they write, never these.
	observedOnly := []string{"*v1.PodList", "*v1.ReplicaSetList", "*v1.EventList", "*v1.ConfigMap", "*v1.Secret", "*v1.ConfigMapList", "*v1.SecretList"}
	app := apptest.NewApp("web", 1, 80, "nginx:1.25")
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-dep", Labels: desired.CommonLabels(app),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "example.com/v2", Kind: "WebApp", Name: "web", UID: app.UID, Controller: ptr.To(true)}}}}
	rs := replicaSetOf(app, "web-1", apptest.ControllerRef("Deployment", "web", "uid-dep"))
	pod := labelledPod(app, "web-1-a", "nginx:1.25", apptest.ControllerRef("ReplicaSet", "web-1", "uid-web-1"))
	env := newFakeEnv(t, app.DeepCopy(), dep, rs, pod)
	var calls []string
	firstWrite := -1
	wrote := func() {
		if firstWrite < 0 {
			firstWrite = len(calls)
		}
		calls = append(calls, "write")
	}
	c := interceptor.NewClient(env.Client.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
			calls = append(calls, fmt.Sprintf("%T", o))
			return c.Get(ctx, key, o, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			calls = append(calls, fmt.Sprintf("%T", list))
			return c.List(ctx, list, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, o runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			wrote()
			return c.Apply(ctx, o, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
			wrote()
			return c.Patch(ctx, o, p, opts...)
		},
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, o runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			wrote()
			return c.SubResource(sub).Apply(ctx, o, opts...)
		},
	})
	r := &WebAppReconciler{Client: c}
	(&fakeEnv{Client: c}).reconcile(t, r, app)
	if firstWrite < 0 {
		t.Fatalf("nothing was written: calls %v", calls)
	}
	for i, call := range calls[firstWrite:] {
		if slices.Contains(observedOnly, call) {
			t.Errorf("call %d, after the first write (call %d), read %s: calls %v", firstWrite+i, firstWrite, call, calls)
		}
	}
	if !slices.Contains(calls[:firstWrite], "*v1.PodList") {
		t.Errorf("the pods were not read before the writes: calls %v", calls)
	}
	got := &webappv2.WebApp{}
	env.get(t, app, got)
	if ready := meta.FindStatusCondition(got.Status.Conditions, webappv2.ConditionReady); ready == nil || ready.Reason != webappv2.ReasonImagePullBackOff {
		t.Errorf("Ready = %+v, want reason %s (the pods read first reach the status)", ready, webappv2.ReasonImagePullBackOff)
	}
}
