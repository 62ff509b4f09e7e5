package status

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/controller/internal/apptest"
	"github.com/example/webapp-operator/controller/pods"
	"github.com/example/webapp-operator/controller/ssa"
)

func TestReadyCondition(t *testing.T) {
	app := apptest.NewApp("web", 3, 80, "nginx")
	app.Generation = 4
	pde := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}
	invalid := &ssa.Error{Kind: "Deployment", Key: types.NamespacedName{Namespace: "ns", Name: "web"},
		Err: apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "web", field.ErrorList{field.Invalid(field.NewPath("spec", "selector"), "x", "field is immutable")})}
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("Apply failed with 1 conflict"))
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "web", errors.New("exceeded quota"))
	notOurs := &ssa.Error{Kind: "Deployment", Key: types.NamespacedName{Namespace: "ns", Name: "web"}, NotOursReason: "is controlled by Helm x"}
	claimNotOurs := &ssa.Error{Kind: "PersistentVolumeClaim", Key: types.NamespacedName{Namespace: "ns", Name: "web"}, NotOursReason: "is controlled by Thing x"}
	held := &heldErr{kind: "Deployment", key: types.NamespacedName{Namespace: "ns", Name: "web"}, by: claimNotOurs}
	T, F, U := metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown
	seen := func(d *appsv1.Deployment) Observation { return Observation{Dep: d, Known: true} }
	// failed is a Deployment whose apply of this generation failed with err: it still has an older spec.
	failed := func(d *appsv1.Deployment, err error) Observation {
		return Observation{Dep: d, Known: true, Err: err}
	}
	retained := []webappv2.RetainedField{{Kind: "Deployment", Field: `.spec.template.spec.containers[name="app"].env[name="DEBUG"]`, Managers: []string{"kubectl-create"}}}
	cases := []struct {
		name        string
		obs         Observation
		err         error
		status      metav1.ConditionStatus
		reason      string
		msgContains string
		progressing metav1.ConditionStatus
		progReason  string
	}{
		{"fully available", seen(apptest.Deployment(2, 2, 3, 3, 3, 3, 3)), nil, T, webappv2.ReasonDeploymentReady, "Deployment has 3/3 replicas available", F, webappv2.ReasonRolloutComplete},
		{"no deployment yet", seen(nil), nil, F, webappv2.ReasonDeploymentMissing, "not been created", T, webappv2.ReasonRollingOut},
		{"stale observed generation", seen(apptest.Deployment(3, 2, 3, 3, 3, 3, 3)), nil, F, webappv2.ReasonDeploymentProgressing, "not observed", T, webappv2.ReasonRollingOut},
		{"deployment not scaled to spec yet", seen(apptest.Deployment(2, 2, 2, 2, 2, 2, 2)), nil, F, webappv2.ReasonDeploymentProgressing, "scaled to 3", T, webappv2.ReasonRollingOut},
		{"rollout with old pods", seen(apptest.Deployment(2, 2, 3, 4, 2, 3, 3)), nil, F, webappv2.ReasonDeploymentProgressing, "2/3 replicas updated, 4 in total", T, webappv2.ReasonRollingOut},
		{"pods not available", seen(apptest.Deployment(2, 2, 3, 3, 3, 3, 1)), nil, F, webappv2.ReasonDeploymentProgressing, "1/3 replicas available", T, webappv2.ReasonRollingOut},
		{"pods ready but not yet available", seen(apptest.Deployment(2, 2, 3, 3, 3, 3, 2)), nil, F, webappv2.ReasonDeploymentProgressing, "2/3", T, webappv2.ReasonRollingOut},
		{"progress deadline", seen(apptest.Deployment(2, 2, 3, 3, 3, 0, 0, pde)), nil, F, webappv2.ReasonProgressDeadlineExceeded, "progress deadline", F, webappv2.ReasonProgressDeadlineExceeded},
		// A spec change fixed the stuck rollout: the old ProgressDeadlineExceeded is about the old spec.
		{"progress deadline of an older spec", seen(apptest.Deployment(3, 2, 3, 3, 3, 0, 0, pde)), nil, F, webappv2.ReasonDeploymentProgressing, "not observed", T, webappv2.ReasonRollingOut},
		// The Deployment refused this generation: the rollout it completed is an older one's, never claimed.
		{"invalid deployment", failed(apptest.Deployment(2, 2, 3, 3, 3, 3, 3), invalid), invalid, F, webappv2.ReasonInvalidChild, "field is immutable", F, webappv2.ReasonInvalidChild},
		{"conflict", failed(apptest.Deployment(2, 2, 3, 3, 3, 3, 3), conflict), conflict, F, webappv2.ReasonApplyConflict, "1 conflict", F, webappv2.ReasonApplyConflict},
		{"forbidden on update", failed(apptest.Deployment(2, 2, 3, 3, 3, 3, 3), forbidden), forbidden, F, webappv2.ReasonApplyForbidden, "exceeded quota", F, webappv2.ReasonApplyForbidden},
		// Only the Service failed: the Deployment has this generation, and its rollout is complete.
		{"invalid service", seen(apptest.Deployment(2, 2, 3, 3, 3, 3, 3)), invalid, F, webappv2.ReasonInvalidChild, "field is immutable", F, webappv2.ReasonRolloutComplete},
		// Rolled out, but a field of an older spec stays: not Ready, and the message says which and whose.
		{"fields retained", Observation{Dep: apptest.Deployment(2, 2, 3, 3, 3, 3, 3), Known: true, Retained: retained}, nil, F, webappv2.ReasonFieldsRetained,
			`Deployment web .spec.template.spec.containers[name="app"].env[name="DEBUG"] (held by kubectl-create)`, F, webappv2.ReasonRolloutComplete},
		{"fields retained while rolling out", Observation{Dep: apptest.Deployment(2, 2, 3, 3, 3, 3, 1), Known: true, Retained: retained}, nil, F,
			webappv2.ReasonDeploymentProgressing, "1/3 replicas available", T, webappv2.ReasonRollingOut},
		{"forbidden on create", seen(nil), forbidden, F, webappv2.ReasonApplyForbidden, "exceeded quota", T, webappv2.ReasonRollingOut},
		// Someone else's Deployment: nothing is claimed from it.
		{"not ours", Observation{}, notOurs, F, webappv2.ReasonChildNotOwned, "will not take it over", U, webappv2.ReasonChildNotOwned},
		// What the pods say is wrong, before the deadline as the reason, past it in the deadline's message.
		{"the pods' trouble", Observation{Dep: apptest.Deployment(2, 2, 3, 3, 3, 0, 0), Known: true,
			Pods: ptrs([]corev1.Pod{apptest.Waiting("ImagePullBackOff", "x:1", nil)})}, nil, F,
			webappv2.ReasonImagePullBackOff, `1/1 pods cannot pull image "x:1"`, T, webappv2.ReasonRollingOut},
		{"the pods' trouble past the deadline", Observation{Dep: apptest.Deployment(2, 2, 3, 3, 3, 0, 0, pde), Known: true,
			Pods: ptrs([]corev1.Pod{apptest.Unschedulable("0/1 nodes are available: 1 Insufficient cpu.")})}, nil, F,
			webappv2.ReasonProgressDeadlineExceeded, "3/3 replicas updated, 0 available; 1/1 pods unschedulable: 0/1 nodes are available: 1 Insufficient cpu.", F, webappv2.ReasonProgressDeadlineExceeded},
		// A read that failed says nothing of the Deployment: Unknown, with the error.
		{"unreadable", Observation{}, errors.New("connection refused"), U, webappv2.ReasonReconcileError, "connection refused", U, webappv2.ReasonReconcileError},
		// Our Deployment, held as it is because its pods would mount a claim that is not ours: known, not this
		// generation's, and the claim is named (as the reconciler observes it: TestObserveAHeldDeployment).
		{"held by a claim not ours", Observation{Dep: apptest.Deployment(2, 2, 3, 3, 3, 3, 3), Known: true, Err: held}, errors.Join(held, claimNotOurs), F, webappv2.ReasonChildNotOwned,
			"its pods would mount PersistentVolumeClaim ns/web, which is not the WebApp's", F, webappv2.ReasonChildNotOwned},
		{"held before it was created", Observation{Known: true, Err: held}, errors.Join(held, claimNotOurs), F, webappv2.ReasonChildNotOwned,
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
	seen := func(d *appsv1.Deployment) Observation { return Observation{Dep: d, Known: true} }
	notOurs := &ssa.Error{Kind: "Deployment", NotOursReason: "is not managed by webapp-operator"}
	cases := []struct {
		name           string
		app            *webappv2.WebApp
		obs            Observation
		err            error
		wantTransition metav1.Time
		wantReplicas   int32
		wantAvailable  int32
	}{
		{"first status", apptest.NewApp("web", 3, 8080, "nginx"), Observation{Known: true}, nil, t1, 0, 0},
		{"status unchanged keeps transition time", withReady(metav1.ConditionFalse), seen(apptest.Deployment(1, 1, 3, 3, 3, 3, 1)), nil, t0, 3, 1},
		{"status flips takes now", withReady(metav1.ConditionFalse), seen(apptest.Deployment(1, 1, 3, 3, 3, 3, 3)), nil, t1, 3, 3},
		{"true stays true", withReady(metav1.ConditionTrue), seen(apptest.Deployment(1, 1, 3, 3, 3, 3, 3)), nil, t0, 3, 3},
		{"unreadable keeps the last counts", withCounts(withReady(metav1.ConditionTrue), 3, 2), Observation{}, errors.New("timeout"), t1, 3, 2},
		{"not ours reports none", withCounts(withReady(metav1.ConditionFalse), 3, 2), Observation{}, notOurs, t0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := apptest.Typed[webappv2.WebApp](t, Desired(tc.app, tc.app, tc.obs, tc.err, t1))
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
	ac := Desired(app, app, Observation{Dep: apptest.Deployment(1, 1, 1, 0, 0, 0, 0), Known: true}, nil, metav1.Now())
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
	got := apptest.Typed[webappv2.WebApp](t, Desired(snapshot, cur, Observation{Dep: apptest.Deployment(1, 1, 1, 1, 1, 1, 1), Known: true}, nil, metav1.Now()))
	if got.Status.ObservedGeneration != 2 || got.Status.Conditions[0].ObservedGeneration != 2 || !got.Status.Conditions[0].LastTransitionTime.Equal(&t0) {
		t.Errorf("status = %+v, want generation 2 and the current transition time %v", got.Status, t0)
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

func TestRetainedMessageNamesFieldManagerAndRemedy(t *testing.T) {
	msg := retainedMessage(apptest.NewApp("web", 1, 80, "nginx"), []webappv2.RetainedField{{Kind: "Deployment", Field: `.spec.template.spec.containers[name="app"].env[name="DEBUG"]`, Managers: []string{"a", "b"}}})
	for _, want := range []string{"Deployment web " + `.spec.template.spec.containers[name="app"].env[name="DEBUG"]` + " (held by a, b)", "kubectl edit", "apply without them"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}

func TestExposedCondition(t *testing.T) {
	viaIngress := webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"}, Ingress: &webappv2.IngressRef{ClassName: "traefik"}}
	viaGateway := webappv2.Expose{Hosts: []webappv2.Hostname{"a.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public", Namespace: "infra"}}
	withAddress := &networkingv1.Ingress{Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{
		Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "10.0.0.9"}, {Hostname: "lb.example.com"}}}}}
	infra := gwv1.Namespace("infra")
	route := func(gen int64, parent string, conds ...metav1.Condition) *gwv1.HTTPRoute {
		r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		r.Status.Parents = []gwv1.RouteParentStatus{{ParentRef: gwv1.ParentReference{Name: gwv1.ObjectName(parent), Namespace: &infra},
			ControllerName: "traefik.io/gateway-controller", Conditions: conds}}
		return r
	}
	cond := func(t, s, reason string, gen int64) metav1.Condition {
		return metav1.Condition{Type: t, Status: metav1.ConditionStatus(s), Reason: reason, Message: "words of " + reason, ObservedGeneration: gen}
	}
	accepted, resolved := cond("Accepted", "True", "Accepted", 2), cond("ResolvedRefs", "True", "ResolvedRefs", 2)
	cases := []struct {
		name           string
		expose         webappv2.Expose
		served         bool
		ing            *networkingv1.Ingress
		route          *gwv1.HTTPRoute
		err            error
		status, reason string
		inMessage      string
	}{
		{"ingress not created yet", viaIngress, true, nil, nil, nil, "False", webappv2.ReasonWaitingForAddress, "not been created"},
		{"ingress without an address", viaIngress, true, &networkingv1.Ingress{}, nil, nil, "False", webappv2.ReasonWaitingForAddress, `class "traefik" has not published`},
		{"ingress with addresses", viaIngress, true, withAddress, nil, nil, "True", webappv2.ReasonExposed, "10.0.0.9, lb.example.com"},
		{"no Gateway API", viaGateway, false, nil, nil, nil, "False", webappv2.ReasonGatewayAPIMissing, "install the Gateway API CRDs"},
		{"route not created yet", viaGateway, true, nil, nil, nil, "False", webappv2.ReasonWaitingForGateway, "not been created"},
		{"no verdict yet", viaGateway, true, nil, &gwv1.HTTPRoute{}, nil, "False", webappv2.ReasonWaitingForGateway, "no controller of Gateway infra/public"},
		{"another gateway's verdict", viaGateway, true, nil, route(2, "other", accepted, resolved), nil, "False", webappv2.ReasonWaitingForGateway, "no controller"},
		{"a verdict on an older generation", viaGateway, true, nil, route(3, "public", accepted, resolved), nil, "False", webappv2.ReasonWaitingForGateway, "current spec"},
		{"not accepted", viaGateway, true, nil, route(2, "public", cond("Accepted", "False", "NotAllowedByListeners", 2)), nil, "False", webappv2.ReasonRouteNotAccepted, "NotAllowedByListeners"},
		{"backend not resolved", viaGateway, true, nil, route(2, "public", accepted, cond("ResolvedRefs", "False", "BackendNotFound", 2)), nil, "False", webappv2.ReasonRouteRefsNotResolved, "BackendNotFound"},
		{"accepted and resolved", viaGateway, true, nil, route(2, "public", accepted, resolved), nil, "True", webappv2.ReasonExposed, "traefik.io/gateway-controller"},
		{"this spec's route refused", viaGateway, true, nil, route(2, "public", accepted, resolved), errors.New("HTTPRoute.gateway.networking.k8s.io \"shop\" is invalid"), "False", webappv2.ReasonReconcileError, "was not applied"},
		{"another listener's verdict", webappv2.Expose{Hosts: viaGateway.Hosts, Gateway: &webappv2.GatewayRef{Name: "public", Namespace: "infra", SectionName: "https"}}, true, nil, route(2, "public", accepted, resolved), nil, "False", webappv2.ReasonWaitingForGateway, "no controller"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := exposedCondition(apptest.Exposed(tc.expose), tc.served, tc.ing, tc.route, tc.err)
			if c.Type != webappv2.ConditionExposed || string(c.Status) != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.inMessage) {
				t.Errorf("got %s %s %q, want %s %s containing %q", c.Status, c.Reason, c.Message, tc.status, tc.reason, tc.inMessage)
			}
		})
	}
}

// What status says of volumes that keep the pods from starting: by name, only what is true.
func TestMountTrouble(t *testing.T) {
	claimApp := apptest.NewApp("x", 1, 80, "nginx")
	claimApp.Spec.Volumes = []webappv2.Volume{{Name: "data", Claim: &webappv2.OwnedClaim{Size: "1Gi"}}}
	pvc := func(phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
	}
	cases := []struct {
		name              string
		app               *webappv2.WebApp
		missing           []string
		claim             *corev1.PersistentVolumeClaim
		podReason, podMsg string
		want              string
	}{
		{"nothing", apptest.NewApp("x", 1, 80, "nginx"), nil, nil, "", "", ""},
		{"a missing ConfigMap", apptest.NewApp("x", 1, 80, "nginx"), []string{`configmap "cm" (volume "config")`}, nil, "", "",
			`configmap "cm" (volume "config") not found: the pods cannot start until it exists`},
		{"a claim waiting for its first pod is not trouble", claimApp, nil, pvc(corev1.ClaimPending), "", "", ""},
		{"a bound claim is not trouble, whatever the pods", claimApp, nil, pvc(corev1.ClaimBound), webappv2.ReasonUnschedulable, "unschedulable: cpu", ""},
		{"a pending claim and no node", claimApp, nil, pvc(corev1.ClaimPending), webappv2.ReasonUnschedulable, "unschedulable: 0/1 nodes are available: 1 node(s) didn't find available persistent volumes to bind.",
			`claim "x" (volume "data") is not bound: unschedulable: 0/1 nodes are available: 1 node(s) didn't find available persistent volumes to bind.`},
		{"a lost claim", claimApp, nil, pvc(corev1.ClaimLost), "", "", `claim "x" (volume "data") is Lost: its volume is gone`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := mountTrouble(tc.app, tc.missing, tc.claim, tc.podReason, tc.podMsg); got != tc.want {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// heldErr is a Deployment held as it is because of another child's failure (the reconciler's heldError).
type heldErr struct {
	kind string
	key  types.NamespacedName
	by   *ssa.Error
}

func (e *heldErr) Error() string {
	return fmt.Sprintf("%s %s is held as it is (not created or changed): its pods would mount %s %s, which is not the WebApp's", e.kind, e.key, e.by.Kind, e.by.Key)
}
func (e *heldErr) Unwrap() error { return e.by }

// TestPreviewVerdict: a blue/green's preview route not accepted by its Gateway is said in Ready, in the Gateway's
// words; an accepted one, or none, says nothing.
func TestPreviewVerdict(t *testing.T) {
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: webappv2.WebAppSpec{
		Expose: &webappv2.Expose{Hosts: []webappv2.Hostname{"shop.example.com"}, Gateway: &webappv2.GatewayRef{Name: "public", Namespace: "infra"}}}}
	parent := gwv1.ParentReference{Name: "public", Namespace: ptr.To(gwv1.Namespace("infra"))}
	route := func(conds ...metav1.Condition) *gwv1.HTTPRoute {
		r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "web-canary", Generation: 1}}
		if conds != nil {
			r.Status.Parents = []gwv1.RouteParentStatus{{ParentRef: parent, ControllerName: "traefik.io/gateway-controller", Conditions: conds}}
		}
		return r
	}
	cond := func(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: 1}
	}
	for _, tc := range []struct {
		name  string
		route *gwv1.HTTPRoute
		want  string
	}{
		{"none", nil, ""},
		{"accepted", route(cond("Accepted", metav1.ConditionTrue, "Accepted", ""), cond("ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs", "")), ""},
		{"not judged yet", route(), "the preview host's route web-canary: no controller of Gateway infra/public has reported on the HTTPRoute yet"},
		{"a host the listener refuses", route(cond("Accepted", metav1.ConditionFalse, "NoMatchingListenerHostname", "no listener accepts preview.example.com")),
			"the preview host's route web-canary: Gateway infra/public does not accept the HTTPRoute: NoMatchingListenerHostname: no listener accepts preview.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := previewVerdict(app, tc.route); !strings.HasPrefix(got, tc.want) || (tc.want == "") != (got == "") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCanaryStatusKeepsRetireSeconds: a plan's retireSeconds is in status.canary while a canary runs or retires (a
// strategy taken out meanwhile still retires its pods that long), and never at rest, where it would cost a write for
// nothing; the default is never written.
func TestCanaryStatusKeepsRetireSeconds(t *testing.T) {
	at := time.Date(2026, 12, 7, 23, 0, 0, 0, time.UTC)
	plan := canary.Plan{Steps: []canary.Step{{Weight: 10}}, Retire: 45 * time.Second}
	for _, c := range []struct {
		name string
		plan canary.Plan
		d    canary.Decision
		want int32
	}{
		{"a canary runs", plan, canary.Decision{State: canary.State{Stable: "a", Canary: "b"}, Phase: canary.PhaseCanary}, 45},
		{"a version left retires", plan, canary.Decision{State: canary.State{Stable: "a", Retiring: "b", RetiringSince: at}, Phase: canary.PhaseStable}, 45},
		{"a rolled-back one retires", plan, canary.Decision{State: canary.State{Stable: "a", Failed: "b", Since: at}, Phase: canary.PhaseRolledBack}, 45},
		{"at rest", plan, canary.Decision{State: canary.State{Stable: "a"}, Phase: canary.PhaseStable}, 0},
		{"rolled back, retired", plan, canary.Decision{State: canary.State{Stable: "a", Failed: "b"}, Phase: canary.PhaseRolledBack}, 0},
		{"the default", canary.Plan{Steps: plan.Steps}, canary.Decision{State: canary.State{Stable: "a", Canary: "b"}, Phase: canary.PhaseCanary}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := CanaryStatus(c.d, c.plan).RetireSeconds
			if ptr.Deref(got, 0) != c.want {
				t.Errorf("retireSeconds %v, want %d", got, c.want)
			}
		})
	}
}
