// 1 KiB writes into a fresh file on the same file system: appends that grow the file,
// pwrites inside a size set ahead (ftruncate in 4 MiB steps), the same over fallocated
// (KEEP_SIZE) space, and memcpy into a shared mapping. Prints ns per write.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(int argc,char**argv){
  const char*dir=argv[1]; long n=atol(argv[2]); int vs=atoi(argv[3]); int mode=atoi(argv[4]);
  char path[4096]; snprintf(path,sizeof path,"%s/appendbench.%d",dir,mode);
  unlink(path); int fd=open(path,O_CREAT|O_RDWR|O_TRUNC,0644); if(fd<0){perror("open");return 1;}
  char*buf=malloc(vs); memset(buf,'x',vs);
  const long step=4<<20; long size=0; long off=0; char*map=NULL; long mapped=0;
  long total=n*(long)vs; 
  double t0=now();
  for(long i=0;i<n;i++){
    if(mode==1||mode==2||mode==3){
      if(off+vs>size){ long ns=size+step; 
        if(mode==2) { if(fallocate(fd,FALLOC_FL_KEEP_SIZE,size,step)) {perror("fallocate");return 1;} }
        if(mode==3) { if(fallocate(fd,0,size,step)) {perror("fallocate");return 1;} }
        else if(ftruncate(fd,ns)){perror("ftruncate");return 1;}
        size=ns; }
    }
    if(mode==0 && (off % step)==0){ if(fallocate(fd,FALLOC_FL_KEEP_SIZE,off,step)) {perror("fa");return 1;} }
    if(mode==4){
      if(off+vs>mapped){ long ns=mapped+step; if(ftruncate(fd,ns)){perror("ft");return 1;}
        if(map) munmap(map,mapped); map=mmap(NULL,ns,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0); if(map==MAP_FAILED){perror("mmap");return 1;} mapped=ns; }
      memcpy(map+off,buf,vs);
    } else if(pwrite(fd,buf,vs,off)!=vs){perror("pwrite");return 1;}
    off+=vs;
  }
  double t1=now();
  printf("mode %d (%s): %ld writes of %d B: %.0f ns each, %.0f MB/s\n",mode,
    mode==0?"append, KEEP_SIZE prealloc 4 MiB":mode==1?"pwrite inside ftruncate'd size":mode==2?"ftruncate over KEEP_SIZE prealloc":mode==3?"fallocate extending size":"memcpy into MAP_SHARED",
    n,vs,(t1-t0)/n,total/((t1-t0)/1e3));
  close(fd); unlink(path); return 0;
}
