// Anchor for libweft.so: the library is weft_core linked whole.
namespace weft {
int sharedLibAnchor = 0;
}
