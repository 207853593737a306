#!/bin/sh
# Doxygen INPUT_FILTER (docs/Doxyfile.in): the public headers document every
# symbol with plain // comments, above it or after it on its line (the
# project's style). Doxygen reads only ///, //! and /** */, so this turns a
# line comment into a doc comment as the file is read: a comment line into
# `///`, a comment after a declaration (`;` or `,`) into `///<`. The headers
# themselves are not changed.
exec sed -E -e 's#^([[:space:]]*)//( |$)#\1///\2#' -e 's#([;,])([[:space:]]*)//( |$)#\1\2///<\3#' "$1"
