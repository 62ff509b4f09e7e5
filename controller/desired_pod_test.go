package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/internal/apptest"
)

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
