package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller"
)

// ourLabels are the three labels the WebApp name's pods carry (the selector's two and managed-by).
func ourLabels(name string) map[string]string {
	return map[string]string{webappv2.LabelName: "webapp", webappv2.LabelInstance: name, webappv2.LabelManagedBy: webappv2.ManagedBy}
}

// makeReplicaSet creates the ReplicaSet the Deployment controller would make for dep (envtest runs no
// controller-manager): our labels, and dep as its controller.
func makeReplicaSet(t *testing.T, dep *appsv1.Deployment, name string) *appsv1.ReplicaSet {
	t.Helper()
	labels := ourLabels(dep.Name)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: dep.Namespace, Name: name, Labels: labels, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "Deployment", Name: dep.Name, UID: dep.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{webappv2.LabelName: "webapp", webappv2.LabelInstance: dep.Name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.25"}}}},
		},
	}
	if err := k8s.Create(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
	return rs
}

// makePod creates a pod with the labels of WebApp app and the given controller (none: a bare pod), and writes its
// status as a kubelet would (envtest runs none): status.
func makePod(t *testing.T, ns, app, name, image string, owner *appsv1.ReplicaSet, status corev1.PodStatus) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: ourLabels(app)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
	if owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner.Name, UID: owner.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	}
	ctx := context.Background()
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = status
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

// cannotPull is the status of a pod whose container's image cannot be pulled.
func cannotPull(image string) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image " + image}}}}}
}

// A pod that carries a WebApp's labels but was not made by its Deployment (a bare pod anyone with `create pods`
// can make) puts no word in its status and is not counted; a pod its Deployment's ReplicaSet made is reported. An
// operator of one namespace and one of all (as the manifests install it) keep pods in types of their own.
func TestPodsItsDeploymentDidNotMakeAreNotTheWebApps(t *testing.T) {
	t.Run("one namespace", func(t *testing.T) { podsItsDeploymentDidNotMake(t, operatorOptions{}) })
	t.Run("all namespaces", func(t *testing.T) { podsItsDeploymentDidNotMake(t, operatorOptions{allNamespaces: true}) })
}

func podsItsDeploymentDidNotMake(t *testing.T, o operatorOptions) {
	ns := newNamespace(t)
	startOperatorWith(t, ns, time.Second, o)
	createWebApp(t, ns, "shop", 1, 80)
	dep, _ := waitChildren(t, ns, "shop")
	// The rollout is not complete, as the Deployment controller would say (envtest runs none): the pods are watched.
	intrudeStatus(t, ns, "shop", func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1}
	})
	// A change of the message alone ("not observed yet" before): written up to the progress interval after the
	// last status write.
	waitReadyWithin(t, wait10s+controller.DefaultProgressInterval, ns, "shop", metav1.ConditionFalse, webappv2.ReasonDeploymentProgressing,
		"0/1 replicas available")
	seen := statusEvents(t, ns, "shop")

	const impostor = "evil.example/impostor:1"
	makePod(t, ns, "shop", "impostor", impostor, nil, cannotPull(impostor))
	// A few resyncs with the impostor in the pod watch's cache.
	waitResyncs(t, 3, 30*time.Second)
	waitReady(t, ns, "shop", metav1.ConditionFalse, webappv2.ReasonDeploymentProgressing)

	// The Deployment's own pod, through its ReplicaSet: its trouble is reported, counted alone.
	rs := makeReplicaSet(t, dep, "shop-5d4f8b")
	makePod(t, ns, "shop", "shop-5d4f8b-x1", "nginx:1.25", rs, cannotPull("nginx:1.25"))
	waitReady(t, ns, "shop", metav1.ConditionFalse, webappv2.ReasonImagePullBackOff, `1/1 pods cannot pull image "nginx:1.25"`)
	waitResyncs(t, 2, 30*time.Second)

	for _, app := range seen() {
		for _, c := range app.Status.Conditions {
			if strings.Contains(c.Message, "impostor") || (c.Type == webappv1.ConditionReady && strings.Contains(c.Message, "/2 pods")) {
				t.Errorf("%s=%s %s: %q (resourceVersion %s): the bare pod was taken for the WebApp's", c.Type, c.Status, c.Reason, c.Message, app.ResourceVersion)
			}
		}
	}
}

// unschedulableStatus is the status the scheduler writes on a pod no node can take.
func unschedulableStatus(msg string) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: msg}}}
}

// A WebApp past its progress deadline whose pods cannot be scheduled says both in Ready; a restarted operator
// writes no status for it (it used to write it without the pods' words, then with them again).
func TestARestartOfAWebAppPastItsDeadlineWritesNoStatus(t *testing.T) {
	ns := newNamespace(t)
	first := startOperator(t, ns, time.Second)
	createWebApp(t, ns, "web", 1, 80)
	dep, _ := waitChildren(t, ns, "web")
	const noNode = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
	makePod(t, ns, "web", "web-7c9d-x1", "nginx:1.25", makeReplicaSet(t, dep, "web-7c9d"), unschedulableStatus(noNode))
	// What the Deployment controller reports once the rollout made no progress for progressDeadlineSeconds.
	intrudeStatus(t, ns, "web", func(d *appsv1.Deployment) {
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
				Reason: webappv2.ReasonProgressDeadlineExceeded, Message: `ReplicaSet "web-7c9d" has timed out progressing.`}}}
	})
	const said = "Deployment exceeded its progress deadline: 1/1 replicas updated, 0 available; 1/1 pods unschedulable: " + noNode
	before := waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonProgressDeadlineExceeded, said)

	seen := statusEvents(t, ns, "web")
	second := restartCostsNoWrites(t, first, ns)
	after := waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonProgressDeadlineExceeded, said)
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the WebApp changed across the restart: resourceVersion %s, then %s", before.ResourceVersion, after.ResourceVersion)
	}
	for _, app := range seen() {
		if c := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionReady); c == nil || c.Message != said {
			t.Errorf("after the restart Ready said %+v (resourceVersion %s)", c, app.ResourceVersion)
		}
	}
	// The restarted operator sees the pods (the test is not passed by a pod watch that never lists): a new word of
	// the scheduler's reaches Ready.
	const stillNoNode = "0/2 nodes are available: 2 Insufficient cpu."
	pod := &corev1.Pod{}
	if err := get(context.Background(), ns, "web-7c9d-x1", pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = unschedulableStatus(stillNoNode)
	if err := k8s.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, "web", metav1.ConditionFalse, webappv2.ReasonProgressDeadlineExceeded, "; 1/1 pods unschedulable: "+stillNoNode)
	second.stop()
}
