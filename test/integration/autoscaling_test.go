package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller"
	"github.com/example/webapp-operator/test/testutil"
)

// TestAutoscalingHandsReplicasOverWithoutADip: switching autoscaling on at 5 replicas hands the count to the
// HorizontalPodAutoscaler without it ever passing through the default; while the HPA scales (here: its writes
// through /scale, under its field manager), the operator sends no Deployment write and reports the HPA's count;
// switching autoscaling off hands the count back at the WebApp's replicas and deletes the HPA. Every count the
// Deployment ever had is watched.
func TestAutoscalingHandsReplicasOverWithoutADip(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	op := startOperator(t, ns, time.Second)
	cs := kubernetes.NewForConfigOrDie(cfg)

	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "auto"},
		Spec: webappv2.WebAppSpec{Image: "nginx", Replicas: ptr.To(int32(5))}}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	deploymentReplicas(t, cs, ns, 5)
	seen := watchReplicas(t, cs, ns, "auto")

	// On: the HPA appears, our apply no longer carries the count, and the count stays 5.
	setAutoscaling(t, ns, &webappv2.Autoscaling{MinReplicas: ptr.To(int32(2)), MaxReplicas: 8})
	testutil.Eventually(t, 30*time.Second, "the HPA, and the count no longer ours", func(ctx context.Context) error {
		hpa := &autoscalingv2.HorizontalPodAutoscaler{}
		if err := get(ctx, ns, "auto", hpa); err != nil {
			return err
		}
		if hpa.Spec.MaxReplicas != 8 || ptr.Deref(hpa.Spec.MinReplicas, 0) != 2 || hpa.Spec.ScaleTargetRef.Name != "auto" || len(hpa.Spec.Metrics) != 1 {
			return fmt.Errorf("hpa spec %+v", hpa.Spec)
		}
		dep := &appsv1.Deployment{}
		if err := get(ctx, ns, "auto", dep); err != nil {
			return err
		}
		if owners := replicaOwners(dep); strings.Contains(owners, controller.FieldManager+"/Apply/;") {
			return fmt.Errorf("spec.replicas still owned by our main apply: %s", owners)
		}
		return nil
	})
	deploymentReplicas(t, cs, ns, 5)

	// The HPA scales: the operator sends no Deployment write, and reports the HPA's count.
	waitResyncs(t, 2, 30*time.Second)
	op.writes.take()
	for _, n := range []int32{7, 3} {
		scaleAsHPA(t, cs, ns, n)
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("status says %d, set by the HPA", n), func(ctx context.Context) error {
			got := &webappv2.WebApp{}
			if err := get(ctx, ns, "auto", got); err != nil {
				return err
			}
			if got.Status.DesiredReplicas != n || got.Status.ReplicasSetBy != "HorizontalPodAutoscaler" {
				return fmt.Errorf("status desired %d set by %q", got.Status.DesiredReplicas, got.Status.ReplicasSetBy)
			}
			return nil
		})
	}
	waitResyncs(t, 3, 30*time.Second)
	for _, w := range op.writes.take() {
		if strings.Contains(w, "/deployments/") {
			t.Errorf("the operator wrote the Deployment while the HPA scaled: %s", w)
		}
	}
	deploymentReplicas(t, cs, ns, 3)

	// Off: the count is the WebApp's again, and the HPA is deleted.
	setAutoscaling(t, ns, nil, 4)
	deploymentReplicas(t, cs, ns, 4)
	testutil.Eventually(t, 30*time.Second, "the HPA deleted", func(ctx context.Context) error {
		if err := get(ctx, ns, "auto", &autoscalingv2.HorizontalPodAutoscaler{}); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	// At rest before the restart: the status says the WebApp's count again (the write the switch-off causes).
	testutil.Eventually(t, 30*time.Second, "status says 4, set by the WebApp", func(ctx context.Context) error {
		got := &webappv2.WebApp{}
		if err := get(ctx, ns, "auto", got); err != nil {
			return err
		}
		if got.Status.DesiredReplicas != 4 || got.Status.ReplicasSetBy != "WebApp" {
			return fmt.Errorf("status desired %d set by %q", got.Status.DesiredReplicas, got.Status.ReplicasSetBy)
		}
		return nil
	})
	waitResyncs(t, 2, 30*time.Second)
	restartCostsNoWrites(t, op, ns)

	for _, n := range seen() {
		if n < 3 {
			t.Errorf("the Deployment's count passed through %d: every count seen %v", n, seen())
			break
		}
	}
	t.Logf("every count the Deployment had: %v", seen())
}

// setAutoscaling sets the WebApp auto's autoscaling (nil: off, with replicas as the count).
func setAutoscaling(t *testing.T, ns string, a *webappv2.Autoscaling, replicas ...int32) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, "the WebApp updated", func(ctx context.Context) error {
		app := &webappv2.WebApp{}
		if err := get(ctx, ns, "auto", app); err != nil {
			return err
		}
		app.Spec.Autoscaling = a
		if len(replicas) > 0 {
			app.Spec.Replicas = &replicas[0]
		}
		return k8s.Update(ctx, app)
	})
}

// scaleAsHPA writes the Deployment's count through /scale as the HPA controller does (an update under its manager).
func scaleAsHPA(t *testing.T, cs kubernetes.Interface, ns string, n int32) {
	t.Helper()
	ctx := context.Background()
	s, err := cs.AppsV1().Deployments(ns).GetScale(ctx, "auto", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Spec.Replicas = n
	if _, err := cs.AppsV1().Deployments(ns).UpdateScale(ctx, "auto", s, metav1.UpdateOptions{FieldManager: "kube-controller-manager"}); err != nil {
		t.Fatal(err)
	}
}

func deploymentReplicas(t *testing.T, cs kubernetes.Interface, ns string, n int32) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("the Deployment at %d", n), func(ctx context.Context) error {
		dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "auto", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := ptr.Deref(dep.Spec.Replicas, 0); got != n {
			return fmt.Errorf("at %d (spec.replicas owned by %s)", got, replicaOwners(dep))
		}
		return nil
	})
}

// replicaOwners lists the managedFields entries that own spec.replicas, as manager/operation/subresource;.
func replicaOwners(dep *appsv1.Deployment) string {
	var b strings.Builder
	for _, e := range dep.ManagedFields {
		if e.FieldsV1 != nil && strings.Contains(e.FieldsV1.GetRawString(), `"f:replicas"`) {
			fmt.Fprintf(&b, "%s/%s/%s;", e.Manager, e.Operation, e.Subresource)
		}
	}
	return b.String()
}

// watchReplicas records every spec.replicas the Deployment name has, from a watch, until the test ends.
func watchReplicas(t *testing.T, cs kubernetes.Interface, ns, name string) func() []int32 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := cs.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []int32
	go func() {
		for ev := range w.ResultChan() {
			if dep, ok := ev.Object.(*appsv1.Deployment); ok {
				mu.Lock()
				if n := ptr.Deref(dep.Spec.Replicas, 0); len(seen) == 0 || seen[len(seen)-1] != n {
					seen = append(seen, n)
				}
				mu.Unlock()
			}
		}
	}()
	return func() []int32 {
		mu.Lock()
		defer mu.Unlock()
		return append([]int32(nil), seen...)
	}
}
