package controller

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/internal/apptest"
	"github.com/example/webapp-operator/controller/pods"
)

// unschedulablePod is a pod of app's ReplicaSet rs that no node can take.
func unschedulablePod(app *webappv2.WebApp, name string, rs *appsv1.ReplicaSet) *corev1.Pod {
	p := apptest.Unschedulable("0/1 nodes are available: 1 Insufficient cpu.")
	p.ObjectMeta = metav1.ObjectMeta{Namespace: app.Namespace, Name: name, UID: types.UID("uid-" + name), Labels: desired.CommonLabels(app),
		OwnerReferences: []metav1.OwnerReference{apptest.ControllerRef("ReplicaSet", rs.Name, rs.UID)}}
	p.Spec.Containers = []corev1.Container{{Name: "app", Image: "nginx:1.25"}}
	return &p
}

// After a restart the pod watch lists the pods again: a status computed from them is not written before they are
// known, whatever it says of them (a trouble reason, the deadline's message with the pods' words), so it is not
// written without them and then with them again.
func TestAfterARestartTheStatusWaitsForThePods(t *testing.T) {
	pde := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: webappv2.ReasonProgressDeadlineExceeded}
	cases := []struct {
		name      string
		depStatus func(gen int64) appsv1.DeploymentStatus
		before    string // Ready's message before the restart
		held      bool
	}{
		{"past the deadline, the pods' trouble in the message", func(gen int64) appsv1.DeploymentStatus {
			return appsv1.DeploymentStatus{ObservedGeneration: gen, Replicas: 1, UpdatedReplicas: 1, Conditions: []appsv1.DeploymentCondition{pde}}
		}, "Deployment exceeded its progress deadline: 1/1 replicas updated, 0 available; 1/1 pods unschedulable: 0/1 nodes are available: 1 Insufficient cpu.", true},
		{"the pods' trouble as the reason", func(gen int64) appsv1.DeploymentStatus {
			return appsv1.DeploymentStatus{ObservedGeneration: gen, Replicas: 1, UpdatedReplicas: 1}
		}, "1/1 pods unschedulable: 0/1 nodes are available: 1 Insufficient cpu.", true},
		// Rolled out: the pods are not read, and the status owes them nothing.
		{"rolled out", func(gen int64) appsv1.DeploymentStatus {
			return appsv1.DeploymentStatus{ObservedGeneration: gen, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
		}, "Deployment has 1/1 replicas available", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			app := apptest.NewApp("web", 1, 80, "nginx:1.25")
			dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-dep", Labels: desired.CommonLabels(app),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "example.com/v2", Kind: "WebApp", Name: "web", UID: app.UID, Controller: ptr.To(true)}}}}
			rs := replicaSetOf(app, "web-1", apptest.ControllerRef("Deployment", "web", dep.UID))
			env := newFakeEnv(t, app, dep, rs, unschedulablePod(app, "web-1-a", rs))
			first := &WebAppReconciler{Client: env}
			env.reconcile(t, first, app)
			env.get(t, app, dep)
			dep.Status = tc.depStatus(dep.Generation)
			if err := env.Status().Update(ctx, dep); err != nil {
				t.Fatal(err)
			}
			env.reconcile(t, first, app)
			env.get(t, app, app)
			if ready := meta.FindStatusCondition(app.Status.Conditions, webappv2.ConditionReady); ready == nil || ready.Message != tc.before {
				t.Fatalf("before the restart Ready = %+v, want message %q", ready, tc.before)
			}

			// The restarted operator: its pod watch has not listed the pods yet.
			unsynced := &fakeCache{FakeInformers: &informertest.FakeInformers{InformersByGVK: map[schema.GroupVersionKind]toolscache.SharedIndexInformer{
				corev1.SchemeGroupVersion.WithKind("Pod"):        controllertest.NewFakeInformer(),
				appsv1.SchemeGroupVersion.WithKind("ReplicaSet"): controllertest.NewFakeInformer(),
			}}, reader: env}
			second := &WebAppReconciler{Client: env, podWatch: newPodWatch(ctx, unsynced, time.Millisecond)}
			defer stopWatch(t, second.podWatch, client.ObjectKeyFromObject(app))
			applies := len(env.webAppApplies)
			res := env.reconcile(t, second, app)
			var said []string // Ready's messages of the status applies sent
			for _, a := range env.webAppApplies[applies:] {
				if a.subresource == "status" {
					for _, c := range a.obj.Status.Conditions {
						if *c.Type == webappv2.ConditionReady {
							said = append(said, *c.Message)
						}
					}
				}
			}
			switch {
			case tc.held && (len(said) != 0 || res.RequeueAfter != pods.Recheck):
				t.Errorf("with the pods being listed: status applies saying %q, RequeueAfter %v; want none, and a look again after %v", said, res.RequeueAfter, pods.Recheck)
			case !tc.held && res.RequeueAfter == pods.Recheck:
				t.Errorf("a rolled-out WebApp waits for pods it does not read")
			}
		})
	}
}
