// Package v2 contains the WebApp API, group example.com, version v2: the storage version and the hub of
// conversion (v1 converts to and from it; see apis/v1/conversion.go).
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=true
// +kubebuilder:ac:output:package=../../applyconfig
// +groupName=example.com
package v2
