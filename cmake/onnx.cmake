# ONNX import: C code for onnx.proto generated at build time by protoc-c (from Debian's libonnx-dev) into the
# build tree. Sets VDNN_ONNX_GEN_C (to compile into the library), VDNN_ONNX_GEN_DIR and VDNN_PROTOBUF_C_INCLUDE
# (its include paths) and VDNN_PROTOBUF_C_LIB (to link).

find_program(VDNN_PROTOC_C NAMES protoc-c)
find_file(VDNN_ONNX_PROTO NAMES onnx.proto PATHS /usr/include/onnx /usr/local/include/onnx NO_DEFAULT_PATH)
find_path(VDNN_PROTOBUF_C_INCLUDE NAMES protobuf-c/protobuf-c.h)
find_library(VDNN_PROTOBUF_C_LIB NAMES protobuf-c)

set(_vdnn_onnx_missing)
if(NOT VDNN_PROTOC_C)
  list(APPEND _vdnn_onnx_missing "protoc-c (Debian package protobuf-c-compiler)")
endif()
if(NOT VDNN_ONNX_PROTO)
  list(APPEND _vdnn_onnx_missing "onnx/onnx.proto (Debian package libonnx-dev)")
endif()
if(NOT VDNN_PROTOBUF_C_INCLUDE OR NOT VDNN_PROTOBUF_C_LIB)
  list(APPEND _vdnn_onnx_missing "protobuf-c headers and library (Debian package libprotobuf-c-dev)")
endif()
if(_vdnn_onnx_missing)
  list(JOIN _vdnn_onnx_missing "\n  " _vdnn_onnx_list)
  message(FATAL_ERROR "vdnn: ONNX import needs, and this machine lacks:\n  ${_vdnn_onnx_list}\n"
                      "Install them with `make setup` (scripts/setup.sh) or apt-get, then configure again.")
endif()

get_filename_component(_vdnn_onnx_proto_dir "${VDNN_ONNX_PROTO}" DIRECTORY)
set(VDNN_ONNX_GEN_DIR "${CMAKE_BINARY_DIR}/generated/onnx")
set(VDNN_ONNX_GEN_C "${VDNN_ONNX_GEN_DIR}/onnx.pb-c.c")
set(VDNN_ONNX_GEN_H "${VDNN_ONNX_GEN_DIR}/onnx.pb-c.h")
file(MAKE_DIRECTORY "${VDNN_ONNX_GEN_DIR}")
add_custom_command(
  OUTPUT "${VDNN_ONNX_GEN_C}" "${VDNN_ONNX_GEN_H}"
  COMMAND "${VDNN_PROTOC_C}" "-I${_vdnn_onnx_proto_dir}" "--c_out=${VDNN_ONNX_GEN_DIR}" "${VDNN_ONNX_PROTO}"
  DEPENDS "${VDNN_ONNX_PROTO}"
  COMMENT "protoc-c: generating C code for ${VDNN_ONNX_PROTO}"
  VERBATIM)

message(STATUS "vdnn: ONNX import from ${VDNN_ONNX_PROTO} (protoc-c ${VDNN_PROTOC_C})")
