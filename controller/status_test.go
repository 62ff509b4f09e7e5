package controller

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/internal/apptest"
	"github.com/example/webapp-operator/controller/ssa"
	"github.com/example/webapp-operator/controller/status"
)

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
	ours := map[string]string{webappv2.LabelManagedBy: webappv2.ManagedBy, webappv2.LabelInstance: "web"}
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
		{"released by a WebApp of another name", claim(map[string]string{webappv2.LabelManagedBy: webappv2.ManagedBy, webappv2.LabelInstance: "api"}), app,
			`was released by WebApp "api"`, webappv2.ReasonChildNotOwned},
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
				if r := status.ApplyErrorReason(held); r != tc.reason || !ce.Waiting() {
					t.Errorf("reason %s (waiting %v), want %s, waiting", r, ce.Waiting(), tc.reason)
				}
				if !strings.Contains(held.Error(), "Deployment ns/web is held as it is") || !strings.Contains(held.Error(), "PersistentVolumeClaim ns/web") {
					t.Errorf("held: %v", held)
				}
			}
		})
	}
}

// TestObserveAHeldDeployment: a Deployment held as it is (its pods would mount a claim that is not the WebApp's) is
// observed as known, with the hold as its write's failure, whether it exists or not yet; the status then names the
// claim (status's TestReadyCondition).
func TestObserveAHeldDeployment(t *testing.T) {
	claimNotOurs := &ssa.Error{Kind: "PersistentVolumeClaim", Key: types.NamespacedName{Namespace: "ns", Name: "web"}, NotOursReason: "is controlled by Thing x"}
	held := &heldError{kind: "Deployment", key: types.NamespacedName{Namespace: "ns", Name: "web"}, by: claimNotOurs}
	dep := apptest.Deployment(2, 2, 3, 3, 3, 3, 3)
	for _, tc := range []struct {
		name string
		out  childOutcome
		want status.Observation
	}{
		{"there", childOutcome{obj: dep}, status.Observation{Dep: dep, Known: true, Err: held}},
		{"not created yet", childOutcome{}, status.Observation{Known: true, Err: held}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := observeDeployment(tc.out, held); got.Dep != tc.want.Dep || got.Known != tc.want.Known || !errors.Is(got.Err, tc.want.Err) {
				t.Errorf("observed %+v, want %+v", got, tc.want)
			}
		})
	}
}
