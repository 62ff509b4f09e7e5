package realnode

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestConversionWebhookBothReplicasGoneAndBack: with no operator replica, v1 requests fail with an error naming the
// conversion webhook, v2 requests and the apps themselves keep working; scaled back, v1 answers again once a
// replica is ready (the time it takes is printed).
func TestConversionWebhookBothReplicasGoneAndBack(t *testing.T) {
	ensureAppNamespace(t)
	apply(t, webApp("conv", 1, ""))
	kubectl(t, "wait", "--for=condition=Ready", "--timeout=120s", "-n", appNS, "webapp/conv")
	url := serviceURL(t, "conv")

	kubectl(t, "scale", "-n", operatorNS, "deployment/webapp-operator", "--replicas=0")
	defer func() {
		kubectl(t, "scale", "-n", operatorNS, "deployment/webapp-operator", "--replicas=2")
		operatorPods(t, 2)
	}()
	kubectl(t, "wait", "--for=delete", "pod", "-n", operatorNS, "-l", "app.kubernetes.io/name=webapp-operator", "--timeout=2m")
	var v1err error
	eventually(t, 30*time.Second, "v1 reads fail without a replica", func() error {
		if _, v1err = kubectlErr("get", "-n", appNS, "webapps.v1.example.com/conv"); v1err == nil {
			return fmt.Errorf("a v1 read still works")
		}
		return nil
	})
	t.Logf("v1 read with no replica: %v", v1err)
	if !strings.Contains(v1err.Error(), "conversion webhook") {
		t.Errorf("the error does not name the conversion webhook: %v", v1err)
	}
	if got := jsonpath(t, "{.spec.image}", "-n", appNS, "webapps.v2.example.com/conv"); got == "" {
		t.Errorf("v2 read without a replica: no image")
	}
	if _, err := getReply(url); err != nil {
		t.Errorf("the app, without an operator replica: %v", err)
	}

	start := time.Now()
	kubectl(t, "scale", "-n", operatorNS, "deployment/webapp-operator", "--replicas=2")
	eventually(t, 3*time.Minute, "v1 reads answered again", func() error {
		_, err := kubectlErr("get", "-n", appNS, "webapps.v1.example.com/conv")
		return err
	})
	fmt.Printf("realnode: conversion webhook: v1 reads answered %v after scaling the operator back up\n", time.Since(start).Round(100*time.Millisecond))
}

// TestWebhookCertificateRenewedWithoutRestart: a serving certificate that must be renewed (here: removed from the
// Secret) is issued again by the same CA and served by both replicas without a restart, and v1 requests never fail
// meanwhile.
func TestWebhookCertificateRenewedWithoutRestart(t *testing.T) {
	ensureAppNamespace(t)
	apply(t, webApp("cert", 1, ""))
	pods := operatorPods(t, 2)
	restarts := jsonpath(t, "{.items[*].status.containerStatuses[0].restartCount}", "-n", operatorNS, "pods", "-l", "app.kubernetes.io/name=webapp-operator")
	ca := jsonpath(t, `{.data.ca\.crt}`, "-n", operatorNS, "secret/webapp-operator-webhook-cert")
	before := map[string]string{}
	for _, p := range pods {
		s, err := servedSerial(t, p)
		if err != nil {
			t.Fatal(err)
		}
		before[p] = s
	}

	var failures atomic.Int32
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			if _, err := kubectlErr("get", "-n", appNS, "webapps.v1.example.com/cert"); err != nil {
				failures.Add(1)
			}
		}
	}()
	kubectl(t, "patch", "secret", "-n", operatorNS, "webapp-operator-webhook-cert", "--type=json",
		"-p", `[{"op":"remove","path":"/data/tls.crt"},{"op":"remove","path":"/data/tls.key"}]`)
	start := time.Now()
	for _, p := range pods {
		eventually(t, 3*time.Minute, "pod "+p+" serves a new certificate", func() error {
			s, err := servedSerial(t, p)
			if err == nil && s == before[p] {
				err = fmt.Errorf("still certificate %s", s)
			}
			return err
		})
	}
	fmt.Printf("realnode: webhook certificate renewed and served by both replicas in %v\n", time.Since(start).Round(100*time.Millisecond))
	close(stop)
	<-done
	if n := failures.Load(); n != 0 {
		t.Errorf("%d v1 reads failed while the certificate was renewed", n)
	}
	if got := jsonpath(t, `{.data.ca\.crt}`, "-n", operatorNS, "secret/webapp-operator-webhook-cert"); got != ca {
		t.Errorf("the CA changed")
	}
	if now := strings.Join(operatorPods(t, 2), " "); now != strings.Join(pods, " ") {
		t.Errorf("operator pods changed from %v to %s", pods, now)
	}
	if now := jsonpath(t, "{.items[*].status.containerStatuses[0].restartCount}", "-n", operatorNS, "pods", "-l", "app.kubernetes.io/name=webapp-operator"); now != restarts {
		t.Errorf("restart counts went from %s to %s", restarts, now)
	}
}

// servedSerial identifies (by a hash) the certificate the pod's webhook server presents.
func servedSerial(t *testing.T, pod string) (string, error) {
	t.Helper()
	ip := jsonpath(t, "{.status.podIP}", "-n", operatorNS, "pod/"+pod)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", net.JoinHostPort(ip, "9443"),
		&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only the certificate's serial is read
	if err != nil {
		return "", fmt.Errorf("dialing the webhook of %s: %w", pod, err)
	}
	defer func() { _ = conn.Close() }()
	sum := sha256.Sum256(conn.ConnectionState().PeerCertificates[0].Raw)
	return hex.EncodeToString(sum[:8]), nil
}
