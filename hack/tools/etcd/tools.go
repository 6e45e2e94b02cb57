//go:build tools

// Package tools pins etcd, whose module root is its main package.
package tools

import _ "go.etcd.io/etcd/server/v3"
