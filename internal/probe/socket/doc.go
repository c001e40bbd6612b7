// Package socket is galago's socket feature (gala-gopher's endpoint probe).
package socket
