# kiln's layers (README's Layout): core → {nn, optim, data, distributed} → lm → apps. Each layer is
# a static library of its own folder that links only the layers under it, and its sources see the
# headers of those layers alone, so an include across the layering fails to compile:
#
#   nn/linear.cpp:3:10: fatal error: lm/trainer.h: No such file or directory
#
# The headers stay where they are, included by their path from the repository root
# ("core/tensor.h"); what each layer may see is an include root of its own in the build folder,
# include_roots/<layer>/, that holds one symbolic link, <layer> → the layer's source folder. A
# layer's root is PUBLIC, so a target sees the roots of exactly the layers it links.

# kiln_add_layer(<layer> [DEPENDS <layer>...]): the static library kiln_<layer> (kiln::<layer>
# to a consumer), linking kiln_<dep> for each layer it DEPENDS on, its sources added by the
# folder's CMakeLists.txt (target_sources). <layer> is a folder name under the repository root.
function(kiln_add_layer layer)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "DEPENDS")
  kiln_include_root(${layer} root)
  add_library(kiln_${layer} STATIC)
  add_library(kiln::${layer} ALIAS kiln_${layer})
  set_target_properties(kiln_${layer} PROPERTIES EXPORT_NAME ${layer})
  target_compile_features(kiln_${layer} PUBLIC cxx_std_20)
  target_include_directories(kiln_${layer} PUBLIC $<BUILD_INTERFACE:${root}>
                                                  $<INSTALL_INTERFACE:include/kiln>)
  foreach(dependency IN LISTS arg_DEPENDS)
    target_link_libraries(kiln_${layer} PUBLIC kiln_${dependency})
  endforeach()
  target_link_libraries(kiln_${layer} PRIVATE $<BUILD_INTERFACE:kiln_flags>)
endfunction()

# kiln_include_root(<folder> <out-var>): the include root that shows the repository folder
# <folder> (and nothing else) at its own path; its path goes into <out-var>.
function(kiln_include_root folder out_var)
  set(root ${PROJECT_BINARY_DIR}/include_roots/${folder})
  file(MAKE_DIRECTORY ${root})
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${folder} ${root}/${folder} SYMBOLIC)
  set(${out_var} ${root} PARENT_SCOPE)
endfunction()
