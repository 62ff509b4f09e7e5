// Package v1 contains the WebApp API, group example.com, version v1: served, converted to and from v2 (the
// storage version) by conversion.go. It has no apply configurations: the operator applies v2 only, and
// controller-gen writes one schema for the apply configurations of a single package.
//
// +kubebuilder:object:generate=true
// +groupName=example.com
package v1
