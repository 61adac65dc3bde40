# Defines the imported target ddprun::libnccl (NCCL's shared library and nccl.h) when NCCL is found,
# searching next to CUDA's toolkit (CUDAToolkit_LIBRARY_DIR / _INCLUDE_DIRS, when found first),
# under /usr/local/cuda, and in DDPRUN_NCCL_HINTS (directories). Sets DDPRUN_NCCL_FOUND.
# Used by ddprun's own build (cmake/Dependencies.cmake) and, installed, by ddprunConfig.cmake: the
# exported ddprun::runtime names ddprun::libnccl, never a path of the machine that built it.
if(TARGET ddprun::libnccl)
  set(DDPRUN_NCCL_FOUND TRUE)
  return()
endif()
find_library(DDPRUN_NCCL_LIBRARY nccl
             HINTS ${DDPRUN_NCCL_HINTS} ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 /usr/local/cuda/lib)
find_path(DDPRUN_NCCL_INCLUDE_DIR nccl.h
          HINTS ${DDPRUN_NCCL_HINTS} ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
mark_as_advanced(DDPRUN_NCCL_LIBRARY DDPRUN_NCCL_INCLUDE_DIR)
if(DDPRUN_NCCL_LIBRARY AND DDPRUN_NCCL_INCLUDE_DIR)
  set(DDPRUN_NCCL_FOUND TRUE)
  add_library(ddprun::libnccl UNKNOWN IMPORTED)
  set_target_properties(ddprun::libnccl PROPERTIES
    IMPORTED_LOCATION "${DDPRUN_NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${DDPRUN_NCCL_INCLUDE_DIR}")
else()
  set(DDPRUN_NCCL_FOUND FALSE)
endif()
