package controller

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/internal/apptest"
	"github.com/example/webapp-operator/controller/pods"
)

// labelledPod is a pod with app's three labels, its controller owner references refs, and one container waiting to
// pull image.
func labelledPod(app *webappv2.WebApp, name, image string, refs ...metav1.OwnerReference) *corev1.Pod {
	p := apptest.Waiting("ImagePullBackOff", image, nil)
	p.ObjectMeta = metav1.ObjectMeta{Namespace: app.Namespace, Name: name, UID: types.UID("uid-" + name), Labels: desired.CommonLabels(app), OwnerReferences: refs}
	p.Spec.Containers = []corev1.Container{{Name: "app", Image: image}}
	return &p
}

// replicaSetOf is a ReplicaSet with app's labels whose controller is the Deployment dep (name and uid).
func replicaSetOf(app *webappv2.WebApp, name string, ref metav1.OwnerReference) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: app.Namespace, Name: name, UID: types.UID("uid-" + name),
		Labels: desired.CommonLabels(app), OwnerReferences: []metav1.OwnerReference{ref}}}
}

// A WebApp's pods are those its Deployment's ReplicaSets control (by UID): a pod that only carries its labels, or
// claims a ReplicaSet another Deployment controls, or a name without the UID, puts no word in its status.
func TestPodsTheDeploymentDidNotMakeAreNotTheWebApps(t *testing.T) {
	app := apptest.NewApp("web", 1, 80, "nginx:1.25")
	// The WebApp's own Deployment (controlled by its UID), whose rollout is not complete.
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-dep", Labels: desired.CommonLabels(app),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "example.com/v2", Kind: "WebApp", Name: "web", UID: app.UID, Controller: ptr.To(true)}}}}
	other := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-other", UID: "uid-web-other", Labels: desired.CommonLabels(app),
		OwnerReferences: []metav1.OwnerReference{apptest.ControllerRef("Deployment", "web", "uid-someone-elses")}}}
	ours := replicaSetOf(app, "web-1", apptest.ControllerRef("Deployment", "web", "uid-dep"))
	impostors := []*corev1.Pod{
		labelledPod(app, "bare", "evil.example/impostor:1"),
		labelledPod(app, "claims-other", "evil.example/impostor:2", apptest.ControllerRef("ReplicaSet", "web-other", "uid-web-other")),
		labelledPod(app, "name-only", "evil.example/impostor:3", apptest.ControllerRef("ReplicaSet", "web-1", "uid-forged")),
		labelledPod(app, "not-controller", "evil.example/impostor:4", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "uid-web-1"}),
	}
	cases := []struct {
		name   string
		pods   []*corev1.Pod
		reason string
		msg    string
	}{
		{"impostors only", impostors, webappv2.ReasonDeploymentProgressing, ""},
		{"impostors and a pod of the Deployment's ReplicaSet", append(impostors[:len(impostors):len(impostors)],
			labelledPod(app, "web-1-a", "nginx:1.26", apptest.ControllerRef("ReplicaSet", "web-1", "uid-web-1"))),
			webappv2.ReasonImagePullBackOff, `1/1 pods cannot pull image "nginx:1.26"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{app.DeepCopy(), dep.DeepCopy(), other.DeepCopy(), ours.DeepCopy()}
			for _, p := range tc.pods {
				objs = append(objs, p.DeepCopy())
			}
			env := newFakeEnv(t, objs...)
			r := &WebAppReconciler{Client: env}
			env.reconcile(t, r, app)
			got := &webappv2.WebApp{}
			env.get(t, app, got)
			ready := meta.FindStatusCondition(got.Status.Conditions, webappv2.ConditionReady)
			if ready == nil || ready.Reason != tc.reason || (tc.msg != "" && ready.Message != tc.msg) {
				t.Errorf("Ready = %+v, want reason %s, message %q", ready, tc.reason, tc.msg)
			}
		})
	}
}

// pods.Owned keeps the pods a ReplicaSet of the Deployment made, by UID at each link of the chain; podsOf without a
// watch and the watch's indexes (indexByController) apply the same test.
func TestOwnedPods(t *testing.T) {
	app := apptest.NewApp("web", 1, 80, "nginx:1.25")
	meta := func(rs *appsv1.ReplicaSet) metav1.PartialObjectMetadata {
		return metav1.PartialObjectMetadata{ObjectMeta: rs.ObjectMeta}
	}
	ours := replicaSetOf(app, "web-1", apptest.ControllerRef("Deployment", "web", "uid-dep"))
	older := replicaSetOf(app, "web-0", apptest.ControllerRef("Deployment", "web", "uid-dep"))
	// A Deployment of the same name, deleted and made again: another UID.
	previous := replicaSetOf(app, "web-p", apptest.ControllerRef("Deployment", "web", "uid-dep-before"))
	notController := replicaSetOf(app, "web-n", apptest.ControllerRef("Deployment", "web", "uid-dep"))
	notController.OwnerReferences[0].Controller = nil
	otherKind := replicaSetOf(app, "web-k", apptest.ControllerRef("StatefulSet", "web", "uid-dep"))
	otherGroup := replicaSetOf(app, "web-g", apptest.ControllerRef("Deployment", "web", "uid-dep"))
	otherGroup.OwnerReferences[0].APIVersion = "example.com/v1"
	all := []metav1.PartialObjectMetadata{meta(ours), meta(older), meta(previous), meta(notController), meta(otherKind), meta(otherGroup)}
	pod := func(name string, refs ...metav1.OwnerReference) *pods.Pod {
		return pods.AsCached(labelledPod(app, name, "nginx:1.25", refs...))
	}
	// A pod with a second, non-controlling owner reference to our ReplicaSet first.
	twoOwners := pod("two-owners", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "uid-web-1"},
		apptest.ControllerRef("ReplicaSet", "web-p", "uid-web-p"))
	cases := []struct {
		name string
		dep  types.UID
		pods []*pods.Pod
		want []string
	}{
		{"the current and an older ReplicaSet's pods", "uid-dep", []*pods.Pod{pod("a", apptest.ControllerRef("ReplicaSet", "web-1", "uid-web-1")),
			pod("b", apptest.ControllerRef("ReplicaSet", "web-0", "uid-web-0"))}, []string{"a", "b"}},
		{"a bare pod", "uid-dep", []*pods.Pod{pod("bare")}, nil},
		{"a ReplicaSet's name with another UID", "uid-dep", []*pods.Pod{pod("forged", apptest.ControllerRef("ReplicaSet", "web-1", "uid-forged"))}, nil},
		{"a ReplicaSet owner that is not the controller", "uid-dep", []*pods.Pod{twoOwners}, nil},
		{"a ReplicaSet of a Deployment of the same name before", "uid-dep", []*pods.Pod{pod("p", apptest.ControllerRef("ReplicaSet", "web-p", "uid-web-p"))}, nil},
		{"a ReplicaSet the Deployment owns without controlling", "uid-dep", []*pods.Pod{pod("n", apptest.ControllerRef("ReplicaSet", "web-n", "uid-web-n"))}, nil},
		{"a ReplicaSet controlled by a StatefulSet of that UID", "uid-dep", []*pods.Pod{pod("k", apptest.ControllerRef("ReplicaSet", "web-k", "uid-web-k"))}, nil},
		{"a ReplicaSet controlled by a Deployment of another group", "uid-dep", []*pods.Pod{pod("g", apptest.ControllerRef("ReplicaSet", "web-g", "uid-web-g"))}, nil},
		{"a controller of the ReplicaSet's UID that is no ReplicaSet", "uid-dep", []*pods.Pod{pod("j", apptest.ControllerRef("Job", "web-1", "uid-web-1"))}, nil},
		// No Deployment of the WebApp's (none, or not controlled by it): no pods at all.
		{"no Deployment", "", []*pods.Pod{pod("a", apptest.ControllerRef("ReplicaSet", "web-1", "uid-web-1"))}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, p := range pods.Owned(tc.dep, all, slices.Clone(tc.pods)) {
				got = append(got, p.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ownedPods = %v, want %v", got, tc.want)
			}
			// The watch's indexes say the same: the pod's controller is a ReplicaSet whose controller is dep.
			var indexed []string
			for _, p := range tc.pods {
				for _, rs := range all {
					if slices.Equal(indexByController("ReplicaSet")(p), []string{string(rs.UID)}) &&
						tc.dep != "" && slices.Equal(indexByController("Deployment")(&rs), []string{string(tc.dep)}) {
						indexed = append(indexed, p.Name)
					}
				}
			}
			if !slices.Equal(indexed, tc.want) {
				t.Errorf("through the indexes: %v, want %v", indexed, tc.want)
			}
		})
	}
}

func TestOwnedDeployment(t *testing.T) {
	app := apptest.NewApp("web", 1, 80, "nginx:1.25")
	dep := func(refs ...metav1.OwnerReference) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "uid-dep", OwnerReferences: refs}}
	}
	ref := metav1.OwnerReference{APIVersion: "example.com/v2", Kind: "WebApp", Name: "web", UID: app.UID, Controller: ptr.To(true)}
	other := ref
	other.UID = "uid-web-before"
	owner := ref
	owner.Controller = nil
	cases := []struct {
		name string
		dep  *appsv1.Deployment
		want types.UID
	}{
		{"controlled by the WebApp", dep(ref), "uid-dep"},
		{"none", nil, ""},
		{"controlled by a WebApp of the same name before", dep(other), ""},
		{"owned without control", dep(owner), ""},
		{"released (an Orphan deletion)", dep(), ""},
	}
	for _, tc := range cases {
		if got := pods.OwnedDeployment(app, tc.dep); got != tc.want {
			t.Errorf("%s: ownedDeployment = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The caches' transforms keep the controller's owner reference, and nothing else of the owners, without copying it.
func TestSlimTransformsKeepTheController(t *testing.T) {
	refs := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "uid-c"}, apptest.ControllerRef("ReplicaSet", "web-1", "uid-web-1")}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: refs, Annotations: map[string]string{"big": "..."}}}
	slim, _ := pods.Slim(p)
	if got := slim.(*pods.Pod).OwnerReferences; len(got) != 1 || &got[0] != &refs[1] {
		t.Errorf("slimPod kept owner references %+v, want the controller's entry, in place", got)
	}
	rs := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "web-1", UID: "uid-web-1", ResourceVersion: "7", OwnerReferences: refs,
		Labels: map[string]string{"pod-template-hash": "abc"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}}}
	got, _ := slimOwned(rs)
	want := metav1.ObjectMeta{Name: "web-1", UID: "uid-web-1", ResourceVersion: "7", OwnerReferences: refs[1:]}
	if m := got.(*metav1.PartialObjectMetadata).ObjectMeta; !equality.Semantic.DeepEqual(m, want) || &m.OwnerReferences[0] != &refs[1] {
		t.Errorf("slimOwned kept %+v, want %+v", m, want)
	}
}
