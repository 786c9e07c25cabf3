package openaiapi

import "net/http"

// The handlers below are the skeleton's: the conversations and items
// (conversations.go, items.go) and the responses (responses.go) replace
// them.

var errTODO = &Error{Status: http.StatusNotImplemented, Type: typeServer, Message: "not implemented yet"}

func (s *Server) createConversation(w http.ResponseWriter, r *http.Request) error { return errTODO }
func (s *Server) getConversation(w http.ResponseWriter, r *http.Request) error    { return errTODO }
func (s *Server) updateConversation(w http.ResponseWriter, r *http.Request) error { return errTODO }
func (s *Server) deleteConversation(w http.ResponseWriter, r *http.Request) error { return errTODO }
func (s *Server) createItems(w http.ResponseWriter, r *http.Request) error        { return errTODO }
func (s *Server) listItems(w http.ResponseWriter, r *http.Request) error          { return errTODO }
func (s *Server) getItem(w http.ResponseWriter, r *http.Request) error            { return errTODO }
func (s *Server) deleteItem(w http.ResponseWriter, r *http.Request) error         { return errTODO }
func (s *Server) createResponse(w http.ResponseWriter, r *http.Request) error     { return errTODO }
func (s *Server) getResponse(w http.ResponseWriter, r *http.Request) error        { return errTODO }
func (s *Server) deleteResponse(w http.ResponseWriter, r *http.Request) error     { return errTODO }
func (s *Server) cancelResponse(w http.ResponseWriter, r *http.Request) error     { return errTODO }
func (s *Server) listInputItems(w http.ResponseWriter, r *http.Request) error     { return errTODO }
