package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/test/testutil"
)

// TestCanaryWebhookHeadersFromASecret: a webhook check's headers are sent with each call, a credential read from a
// Secret when each round starts (a rotated one is used from the next round); a Secret that is gone fails the check
// naming the Secret, and its value is nowhere in the status or the events. The API server refuses a header with
// both a value and a Secret, and one the operator sets itself.
func TestCanaryWebhookHeadersFromASecret(t *testing.T) {
	var token atomic.Value
	token.Store("Bearer t0ken-1")
	var seen atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != token.Load() || r.Header.Get("X-Tenant") != "shop" {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		seen.Add(1)
		_, _ = fmt.Fprint(w, `{"value": 0.001}`)
	}))
	defer hook.Close()
	ns := newNamespace(t)
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "judge-token"}, Data: map[string][]byte{"token": []byte("Bearer t0ken-1")}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	webhook := &webappv2.WebhookCheck{URL: hook.URL + "/judge", Headers: []webappv2.WebhookHeader{
		{Name: "Authorization", SecretKeyRef: &webappv2.SecretKeyRef{Name: "judge-token", Key: "token"}},
		{Name: "X-Tenant", Value: "shop"},
	}}
	for _, c := range []struct {
		header webappv2.WebhookHeader
		want   string
	}{
		{webappv2.WebhookHeader{Name: "Authorization", Value: "x", SecretKeyRef: &webappv2.SecretKeyRef{Name: "s", Key: "k"}}, "exactly one of value or secretKeyRef"},
		{webappv2.WebhookHeader{Name: "Authorization"}, "exactly one of value or secretKeyRef"},
		{webappv2.WebhookHeader{Name: "host", Value: "judge.example.com"}, "the operator sets them"},
	} {
		app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "hdr-"}, Spec: webappv2.WebAppSpec{Image: "shop:1",
			Rollout: webappv2.RolloutSpec{Canary: &webappv2.CanarySpec{Steps: []webappv2.CanaryStep{{Weight: 10}},
				Checks: []webappv2.CanaryCheck{{Name: "judge", Max: "1", Webhook: &webappv2.WebhookCheck{URL: "http://judge", Headers: []webappv2.WebhookHeader{c.header}}}}}}}}
		if err := k8s.Create(ctx, app); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("header %+v: %v, want refused saying %q", c.header, err, c.want)
		}
	}

	startOperator(t, ns, time.Second)
	canaryStarted(t, ns, &webappv2.CanarySpec{
		Steps:                []webappv2.CanaryStep{{Weight: 50}, {Weight: 60, PauseSeconds: 3600}},
		Checks:               []webappv2.CanaryCheck{{Name: "judge", Webhook: webhook, Max: "0.01"}},
		CheckIntervalSeconds: 1,
	})
	// Sent with the Secret's value: the first step passes.
	canaryPhase(t, ns, "web", "Canary/1/50")
	// Rotated: the next rounds send the new value.
	token.Store("Bearer t0ken-2")
	secret.Data["token"] = []byte("Bearer t0ken-2")
	if err := k8s.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	before := seen.Load()
	testutil.Eventually(t, 30*time.Second, "a call with the rotated token", func(context.Context) error {
		if seen.Load() <= before {
			return fmt.Errorf("no call with the rotated token yet")
		}
		return nil
	})
	// Gone: the check fails, naming the Secret, and the canary (no failure allowed) is rolled back.
	if err := k8s.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	rolled := canaryPhase(t, ns, "web", "RolledBack/1/0")
	if msg := rolled.Status.Canary.Message; !strings.Contains(msg, "check judge: webhook header Authorization: Secret judge-token") || !strings.Contains(msg, "not found") {
		t.Errorf("rolled back with %q, want the missing Secret named", msg)
	}
	raw, err := json.Marshal(rolled.Status)
	if err != nil {
		t.Fatal(err)
	}
	if everything := string(raw) + strings.Join(eventsSince(t, ns, time.Time{}), "\n"); strings.Contains(everything, "t0ken") {
		t.Errorf("the Secret's value is in the status or the events:\n%s", everything)
	}
}
