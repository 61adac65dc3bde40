# The all-reduce benchmark (bench/allreduce_bench.py, docs/performance.md); bench/CMakeLists.txt
# include()s this file. allreduce is its ddprun worker program (the PyTorch twin is
# bench/allreduce_torch.py); memcpy_ceiling measures the single-core copy bandwidth it quotes.
if(TARGET ddprun::runtime)  # worker_runtime/ is added before bench/
  add_executable(allreduce ${CMAKE_CURRENT_LIST_DIR}/allreduce.cpp)
  target_link_libraries(allreduce PRIVATE ddprun::runtime ddprun_warnings)
endif()
add_executable(memcpy_ceiling ${CMAKE_CURRENT_LIST_DIR}/memcpy_ceiling.cpp)
target_link_libraries(memcpy_ceiling PRIVATE ddprun_warnings)
