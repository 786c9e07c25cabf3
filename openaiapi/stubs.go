package openaiapi

import "net/http"

// The handlers below are the skeleton's: the conversations and items
// (conversations.go, items.go) and the responses (responses.go) replace
// them.

var errTODO = &Error{Status: http.StatusNotImplemented, Type: typeServer, Message: "not implemented yet"}

func (s *Server) createResponse(w http.ResponseWriter, r *http.Request) error { return errTODO }
func (s *Server) getResponse(w http.ResponseWriter, r *http.Request) error    { return errTODO }
func (s *Server) deleteResponse(w http.ResponseWriter, r *http.Request) error { return errTODO }
func (s *Server) cancelResponse(w http.ResponseWriter, r *http.Request) error { return errTODO }
func (s *Server) listInputItems(w http.ResponseWriter, r *http.Request) error { return errTODO }
