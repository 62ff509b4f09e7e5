package controller

import (
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/internal/apptest"
	"github.com/example/webapp-operator/controller/pods"
)

func deployment(gen, observed int64, spec, replicas, updated, ready, available int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: gen},
		Spec:       appsv1.DeploymentSpec{Replicas: &spec},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated,
			ReadyReplicas: ready, AvailableReplicas: available, Conditions: conds,
		},
	}
}

func TestReadyCondition(t *testing.T) {
	app := apptest.NewApp("web", 3, 80, "nginx")
	app.Generation = 4
	pde := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}
	invalid := &childError{kind: "Deployment", key: types.NamespacedName{Namespace: "ns", Name: "web"},
		err: apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web", field.ErrorList{field.Invalid(field.NewPath("spec", "selector"), "x", "field is immutable")})}
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("Apply failed with 1 conflict"))
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "web", errors.New("exceeded quota"))
	notOurs := &childError{kind: "Deployment", key: types.NamespacedName{Namespace: "ns", Name: "web"}, notOurs: "is controlled by Helm x"}
	claimNotOurs := &childError{kind: "PersistentVolumeClaim", key: types.NamespacedName{Namespace: "ns", Name: "web"}, notOurs: "is controlled by Thing x"}
	held := &heldError{kind: "Deployment", key: types.NamespacedName{Namespace: "ns", Name: "web"}, by: claimNotOurs}
	T, F, U := metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown
	seen := func(d *appsv1.Deployment) observation { return observation{dep: d, known: true} }
	// failed is a Deployment whose apply of this generation failed with err: it still has an older spec.
	failed := func(d *appsv1.Deployment, err error) observation { return observation{dep: d, known: true, err: err} }
	retained := []webappv2.RetainedField{{Kind: "Deployment", Field: `.spec.template.spec.containers[name="app"].env[name="DEBUG"]`, Managers: []string{"kubectl-create"}}}
	cases := []struct {
		name        string
		obs         observation
		err         error
		status      metav1.ConditionStatus
		reason      string
		msgContains string
		progressing metav1.ConditionStatus
		progReason  string
	}{
		{"fully available", seen(deployment(2, 2, 3, 3, 3, 3, 3)), nil, T, webappv2.ReasonDeploymentReady, "Deployment has 3/3 replicas available", F, webappv2.ReasonRolloutComplete},
		{"no deployment yet", seen(nil), nil, F, webappv2.ReasonDeploymentMissing, "not been created", T, webappv2.ReasonRollingOut},
		{"stale observed generation", seen(deployment(3, 2, 3, 3, 3, 3, 3)), nil, F, webappv2.ReasonDeploymentProgressing, "not observed", T, webappv2.ReasonRollingOut},
		{"deployment not scaled to spec yet", seen(deployment(2, 2, 2, 2, 2, 2, 2)), nil, F, webappv2.ReasonDeploymentProgressing, "scaled to 3", T, webappv2.ReasonRollingOut},
		{"rollout with old pods", seen(deployment(2, 2, 3, 4, 2, 3, 3)), nil, F, webappv2.ReasonDeploymentProgressing, "2/3 replicas updated, 4 in total", T, webappv2.ReasonRollingOut},
		{"pods not available", seen(deployment(2, 2, 3, 3, 3, 3, 1)), nil, F, webappv2.ReasonDeploymentProgressing, "1/3 replicas available", T, webappv2.ReasonRollingOut},
		{"pods ready but not yet available", seen(deployment(2, 2, 3, 3, 3, 3, 2)), nil, F, webappv2.ReasonDeploymentProgressing, "2/3", T, webappv2.ReasonRollingOut},
		{"progress deadline", seen(deployment(2, 2, 3, 3, 3, 0, 0, pde)), nil, F, webappv2.ReasonProgressDeadlineExceeded, "progress deadline", F, webappv2.ReasonProgressDeadlineExceeded},
		// A spec change fixed the stuck rollout: the old ProgressDeadlineExceeded is about the old spec.
		{"progress deadline of an older spec", seen(deployment(3, 2, 3, 3, 3, 0, 0, pde)), nil, F, webappv2.ReasonDeploymentProgressing, "not observed", T, webappv2.ReasonRollingOut},
		// The Deployment refused this generation: the rollout it completed is an older one's, never claimed.
		{"invalid deployment", failed(deployment(2, 2, 3, 3, 3, 3, 3), invalid), invalid, F, webappv2.ReasonInvalidChild, "field is immutable", F, webappv2.ReasonInvalidChild},
		{"conflict", failed(deployment(2, 2, 3, 3, 3, 3, 3), conflict), conflict, F, webappv2.ReasonApplyConflict, "1 conflict", F, webappv2.ReasonApplyConflict},
		{"forbidden on update", failed(deployment(2, 2, 3, 3, 3, 3, 3), forbidden), forbidden, F, webappv2.ReasonApplyForbidden, "exceeded quota", F, webappv2.ReasonApplyForbidden},
		// Only the Service failed: the Deployment has this generation, and its rollout is complete.
		{"invalid service", seen(deployment(2, 2, 3, 3, 3, 3, 3)), invalid, F, webappv2.ReasonInvalidChild, "field is immutable", F, webappv2.ReasonRolloutComplete},
		// Rolled out, but a field of an older spec stays: not Ready, and the message says which and whose.
		{"fields retained", observation{dep: deployment(2, 2, 3, 3, 3, 3, 3), known: true, retained: retained}, nil, F, webappv2.ReasonFieldsRetained,
			`Deployment web .spec.template.spec.containers[name="app"].env[name="DEBUG"] (held by kubectl-create)`, F, webappv2.ReasonRolloutComplete},
		{"fields retained while rolling out", observation{dep: deployment(2, 2, 3, 3, 3, 3, 1), known: true, retained: retained}, nil, F,
			webappv2.ReasonDeploymentProgressing, "1/3 replicas available", T, webappv2.ReasonRollingOut},
		{"forbidden on create", seen(nil), forbidden, F, webappv2.ReasonApplyForbidden, "exceeded quota", T, webappv2.ReasonRollingOut},
		// Someone else's Deployment: nothing is claimed from it.
		{"not ours", observation{}, notOurs, F, webappv2.ReasonChildNotOwned, "will not take it over", U, webappv2.ReasonChildNotOwned},
		// What the pods say is wrong, before the deadline as the reason, past it in the deadline's message.
		{"the pods' trouble", observation{dep: deployment(2, 2, 3, 3, 3, 0, 0), known: true,
			pods: ptrs([]corev1.Pod{apptest.Waiting("ImagePullBackOff", "x:1", nil)})}, nil, F,
			webappv2.ReasonImagePullBackOff, `1/1 pods cannot pull image "x:1"`, T, webappv2.ReasonRollingOut},
		{"the pods' trouble past the deadline", observation{dep: deployment(2, 2, 3, 3, 3, 0, 0, pde), known: true,
			pods: ptrs([]corev1.Pod{apptest.Unschedulable("0/1 nodes are available: 1 Insufficient cpu.")})}, nil, F,
			webappv2.ReasonProgressDeadlineExceeded, "3/3 replicas updated, 0 available; 1/1 pods unschedulable: 0/1 nodes are available: 1 Insufficient cpu.", F, webappv2.ReasonProgressDeadlineExceeded},
		// A read that failed says nothing of the Deployment: Unknown, with the error.
		{"unreadable", observation{}, errors.New("connection refused"), U, webappv2.ReasonReconcileError, "connection refused", U, webappv2.ReasonReconcileError},
		// Our Deployment, held as it is because its pods would mount a claim that is not ours: known, not this
		// generation's, and the claim is named.
		{"held by a claim not ours", observe(childOutcome{obj: deployment(2, 2, 3, 3, 3, 3, 3)}, held), errors.Join(held, claimNotOurs), F, webappv2.ReasonChildNotOwned,
			"its pods would mount PersistentVolumeClaim ns/web, which is not the WebApp's", F, webappv2.ReasonChildNotOwned},
		{"held before it was created", observe(childOutcome{}, held), errors.Join(held, claimNotOurs), F, webappv2.ReasonChildNotOwned,
			"PersistentVolumeClaim ns/web already exists and is controlled by Thing x", F, webappv2.ReasonChildNotOwned},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rolloutOf(app, tc.obs, tc.err)
			c := readyCondition(app, r, tc.err)
			if c.Type != webappv2.ConditionReady || c.Status != tc.status || c.Reason != tc.reason || c.ObservedGeneration != 4 {
				t.Errorf("condition = %+v, want status %s reason %s generation 4", c, tc.status, tc.reason)
			}
			if !strings.Contains(c.Message, tc.msgContains) {
				t.Errorf("message %q does not contain %q", c.Message, tc.msgContains)
			}
			p := progressingCondition(app, r)
			if p.Type != webappv2.ConditionProgressing || p.Status != tc.progressing || p.Reason != tc.progReason || p.ObservedGeneration != 4 {
				t.Errorf("progressing = %+v, want status %s reason %s generation 4", p, tc.progressing, tc.progReason)
			}
		})
	}
}

func TestDesiredStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	withReady := func(s metav1.ConditionStatus) *webappv2.WebApp {
		app := apptest.NewApp("web", 3, 8080, "nginx")
		app.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: s, LastTransitionTime: t0, Reason: "X"}}
		return app
	}
	withCounts := func(app *webappv2.WebApp, replicas, available int32) *webappv2.WebApp {
		app.Status.Replicas, app.Status.AvailableReplicas = replicas, available
		return app
	}
	seen := func(d *appsv1.Deployment) observation { return observation{dep: d, known: true} }
	notOurs := &childError{kind: "Deployment", notOurs: "is not managed by webapp-operator"}
	cases := []struct {
		name           string
		app            *webappv2.WebApp
		obs            observation
		err            error
		wantTransition metav1.Time
		wantReplicas   int32
		wantAvailable  int32
	}{
		{"first status", apptest.NewApp("web", 3, 8080, "nginx"), observation{known: true}, nil, t1, 0, 0},
		{"status unchanged keeps transition time", withReady(metav1.ConditionFalse), seen(deployment(1, 1, 3, 3, 3, 3, 1)), nil, t0, 3, 1},
		{"status flips takes now", withReady(metav1.ConditionFalse), seen(deployment(1, 1, 3, 3, 3, 3, 3)), nil, t1, 3, 3},
		{"true stays true", withReady(metav1.ConditionTrue), seen(deployment(1, 1, 3, 3, 3, 3, 3)), nil, t0, 3, 3},
		{"unreadable keeps the last counts", withCounts(withReady(metav1.ConditionTrue), 3, 2), observation{}, errors.New("timeout"), t1, 3, 2},
		{"not ours reports none", withCounts(withReady(metav1.ConditionFalse), 3, 2), observation{}, notOurs, t0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := apptest.Typed[webappv2.WebApp](t, desiredStatus(tc.app, tc.app, tc.obs, tc.err, t1))
			st := got.Status
			if got.Name != "web" || got.Namespace != "ns" || got.Kind != "WebApp" || got.APIVersion != "example.com/v2" {
				t.Errorf("identity = %s %s/%s %s", got.APIVersion, got.Namespace, got.Name, got.Kind)
			}
			if st.ObservedGeneration != 1 || st.URL != "http://web.ns.svc:8080" ||
				st.Selector != "app.kubernetes.io/instance=web,app.kubernetes.io/name=webapp" {
				t.Errorf("status = %+v", st)
			}
			if st.Replicas != tc.wantReplicas || st.AvailableReplicas != tc.wantAvailable {
				t.Errorf("replicas %d available %d, want %d %d", st.Replicas, st.AvailableReplicas, tc.wantReplicas, tc.wantAvailable)
			}
			if len(st.Conditions) != 2 || !st.Conditions[0].LastTransitionTime.Equal(&tc.wantTransition) {
				t.Errorf("conditions = %+v, want transition %v", st.Conditions, tc.wantTransition)
			}
		})
	}
}

// A zero count must be left out of the desired status, or it never equals what we own (the server drops it).
func TestDesiredStatusLeavesZeroCountsUnset(t *testing.T) {
	app := apptest.NewApp("web", 1, 80, "nginx")
	ac := desiredStatus(app, app, observation{dep: deployment(1, 1, 1, 0, 0, 0, 0), known: true}, nil, metav1.Now())
	if ac.Status.Replicas != nil || ac.Status.AvailableReplicas != nil {
		t.Errorf("zero counts set: replicas %v available %v", ac.Status.Replicas, ac.Status.AvailableReplicas)
	}
}

// The status reports the generation of the snapshot the children were built from, never a newer one the WebApp
// has meanwhile; the transition times come from the WebApp as it is now.
func TestDesiredStatusClaimsTheSnapshotsGeneration(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	snapshot := apptest.NewApp("web", 1, 80, "nginx")
	snapshot.Generation = 2
	cur := snapshot.DeepCopy()
	cur.Generation = 3
	cur.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, LastTransitionTime: t0, Reason: "X"}}
	got := apptest.Typed[webappv2.WebApp](t, desiredStatus(snapshot, cur, observation{dep: deployment(1, 1, 1, 1, 1, 1, 1), known: true}, nil, metav1.Now()))
	if got.Status.ObservedGeneration != 2 || got.Status.Conditions[0].ObservedGeneration != 2 || !got.Status.Conditions[0].LastTransitionTime.Equal(&t0) {
		t.Errorf("status = %+v, want generation 2 and the current transition time %v", got.Status, t0)
	}
}

// A claim of the WebApp's name is mounted only when it is the WebApp's: controlled by it, or released by it (no
// controller, our managed-by label). Anything else is refused, and the refusal names the claim.
func TestClaimRefusal(t *testing.T) {
	app := apptest.NewApp("web", 1, 80, "nginx")
	app.Namespace, app.UID = "ns", "uid-web"
	app.Spec.Volumes = []webappv2.Volume{{Name: "data", Claim: &webappv2.OwnedClaim{Size: "1Gi"}}}
	rwx := app.DeepCopy()
	rwx.Spec.Volumes[0].Claim.AccessMode = corev1.ReadWriteMany
	claim := func(labels map[string]string, refs ...metav1.OwnerReference) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Labels: labels, OwnerReferences: refs},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}
	}
	controls := func(kind, name string, uid types.UID) metav1.OwnerReference {
		return metav1.OwnerReference{Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}
	}
	ours := map[string]string{webappv2.LabelManagedBy: webappv2.ManagedBy}
	rwxClaim := claim(ours, controls("WebApp", "web", "uid-web"))
	rwxClaim.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	cases := []struct {
		name   string
		pvc    *corev1.PersistentVolumeClaim
		app    *webappv2.WebApp
		want   string // in the refusal ("" none)
		reason string // of the refusal
	}{
		{"controlled by the WebApp", claim(ours, controls("WebApp", "web", "uid-web")), app, "", ""},
		{"released by it (kept on deletion)", claim(ours), app, "", ""},
		{"ReadWriteMany, as asked", rwxClaim, rwx, "", ""},
		{"someone's, unlabelled", claim(nil), app, "PersistentVolumeClaim ns/web already exists and is not managed by webapp-operator", webappv2.ReasonChildNotOwned},
		{"someone's, with our label", claim(ours, controls("StatefulSet", "db", "uid-db")), app, "is controlled by StatefulSet db", webappv2.ReasonChildNotOwned},
		{"an earlier WebApp's of the same name", claim(ours, controls("WebApp", "web", "uid-old")), app, "is controlled by WebApp web", webappv2.ReasonChildNotOwned},
		// Taken up again after a release, with the modes it was made with: three pods rolling onto it would wait.
		{"released ReadWriteOnce, asked ReadWriteMany", claim(ours), rwx, "its access modes are [ReadWriteOnce], and the WebApp's claim asks for ReadWriteMany", webappv2.ReasonInvalidChild},
		{"ours ReadWriteMany, asked ReadWriteOnce", rwxClaim, app, "its access modes are [ReadWriteMany]", webappv2.ReasonInvalidChild},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ce := claimRefusal(tc.pvc, tc.app)
			switch {
			case tc.want == "" && ce != nil:
				t.Errorf("refused: %v", ce)
			case tc.want == "":
			case ce == nil || !strings.Contains(ce.Error(), tc.want):
				t.Errorf("refusal %v, want one saying %q", ce, tc.want)
			default:
				// As the status says it of the held Deployment.
				held := &heldError{kind: "Deployment", key: types.NamespacedName{Namespace: "ns", Name: "web"}, by: ce}
				if r := applyErrorReason(held); r != tc.reason || !ce.waiting() {
					t.Errorf("reason %s (waiting %v), want %s, waiting", r, ce.waiting(), tc.reason)
				}
				if !strings.Contains(held.Error(), "Deployment ns/web is held as it is") || !strings.Contains(held.Error(), "PersistentVolumeClaim ns/web") {
					t.Errorf("held: %v", held)
				}
			}
		})
	}
}

// ptrs are pods as the pod watch keeps them.
func ptrs(list []corev1.Pod) []*pods.Pod {
	out := make([]*pods.Pod, len(list))
	for i := range list {
		out[i] = pods.AsCached(&list[i])
	}
	return out
}
